"""`python -m acemad_utils run QUESTIONS` (api.run on a question file; docs/own-questions.md) and `... pilot`: the
whole file is checked before any call (a bad row: one line, exit 2), an endpoint run prints its estimate first and
asks above CONFIRM_USD / CONFIRM_CALLS (--yes), and over half the commitments unparsed exits 1."""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from acemad_utils import api, pilot
from acemad_utils.agents.budget import ENV_MAX, BudgetExceeded, paid_line, parse_max_usd
from acemad_utils.agents.health import EndpointDown
from acemad_utils.agents.redact import redact
from acemad_utils.agents.sim import SYNTHETIC_LABEL
from acemad_utils.data.own import read_columns, read_questions
from acemad_utils.data.paths import atomic_write, outputs, outputs_root, safe_segment
from acemad_utils.data.settings import env
from acemad_utils.experiments.runner import PARSE_FAILURE_LIMIT, RunInterrupted
from acemad_utils.experiments.subsets import THRESHOLD, item_stats, subset_config
from acemad_utils.protocol.config import METHODS
from acemad_utils.protocol.schema import Question
from acemad_utils.report import premise as PR
from acemad_utils.report.save import with_source
from acemad_utils.report.viewer import page_path

# Above either the command asks before sending (--yes: not). $1 is ~2,000 questions x 3 methods on GPT-4o-mini.
CONFIRM_USD, CONFIRM_CALLS = 1.0, 2000


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m acemad_utils", description="AceMAD and the baselines on your questions"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    both = argparse.ArgumentParser(add_help=False)  # the options run and pilot share
    both.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    both.add_argument("--seed", type=int, default=0)
    both.add_argument("--workers", type=int, default=8, help="questions in flight with an endpoint (default 8)")
    both.add_argument("--out", default=api.DEFAULT_OUT, help=f"output folder (default ./{api.DEFAULT_OUT})")
    r = sub.add_parser("run", parents=[both], help="run methods on a question file (.jsonl or .csv); see "
                       "docs/own-questions.md")  # fmt: skip
    r.add_argument("questions", help="a .jsonl or .csv file (question, options, answer, id), or with --*-col any "
                   ".jsonl, .csv or .parquet")  # fmt: skip
    r.add_argument("--methods", default="acemad,decentralized,majority", help=f"comma-separated, from {METHODS}")
    who = r.add_mutually_exclusive_group(required=True)
    who.add_argument("--synthetic", action="store_true", help="the synthetic population (a mechanism model, no LLM)")
    who.add_argument("--model", help="the endpoint's model (key: OPENAI_API_KEY; URL: --base-url or OPENAI_BASE_URL)")
    r.add_argument("--rounds", type=int, default=3, help="T, debate rounds (default 3)")
    r.add_argument("--agents", type=int, default=5, help="N, agents per debate (default 5)")
    r.add_argument("--eta", type=float, default=2.0, help="AceMAD's learning rate (default 2)")
    r.add_argument("--name", default=None, help="run name (default: the file's name)")
    r.add_argument("--challenging", action="store_true", help="first keep only the paper's challenging subset: the "
                   "naive single agent answers each question 5 times and those it gets right in fewer than "
                   f"{THRESHOLD:.0%}% of its runs are kept (every question then needs an answer; those runs are calls "
                   "too)")  # fmt: skip
    r.add_argument(
        "--role-model", action="append", default=[], metavar="ROLE=NAME[@URL]",
        help=f"a role's own model (and endpoint), repeatable; roles: {', '.join(api.ROLES)}",
    )  # fmt: skip
    r.add_argument("--yes", action="store_true", help="do not ask before a run above the estimate's threshold")
    cols = r.add_argument_group("any dataset by its columns (docs/own-questions.md)")
    cols.add_argument("--question-col", help="the question's column (default: question); a.b reaches into objects")
    cols.add_argument("--choices-col", help="the options' column (list, map, ARC's {text,label}, TruthfulQA's "
                      "{choices,labels}), or several comma-separated columns, one option each")  # fmt: skip
    cols.add_argument("--answer-col", help="the gold answer's column: a label, an option's text or a 0-based index")
    cols.add_argument("--id-col", help="a column of unique ids (default: an id from the question's content)")
    cols.add_argument("--skip-invalid", action="store_true",
                      help="leave out rows that fail a row's checks (the count and the first are named)")  # fmt: skip
    p = sub.add_parser(
        "pilot", parents=[both], help="a few dollars first: the premise check and the n the full run needs"
    )
    p.add_argument("questions", nargs="?", help="a question file (.jsonl/.csv); or --profile")
    p.add_argument("--profile", help="a profile's challenging subsets, e.g. paper (make pilot PROFILE=paper)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as reproduce --set (--profile)")
    p.add_argument("--model", help="the endpoint's model (a question file)")
    p.add_argument("--usd", type=float, default=pilot.DEFAULT_USD, help="budget in USD (default 5; MAX_USD if lower)")
    p.add_argument("--per-benchmark", type=int, default=None, help="questions per benchmark (default: the budget's)")
    p.add_argument("--dry-run", action="store_true", help="print the priced plan and stop (no call)")
    return ap


def roles(args) -> dict[str, str]:
    out = {}
    for item in args.role_model:
        role, sep, value = item.partition("=")
        if not sep or not value or role in out:
            raise ValueError(f"--role-model {item!r:.80}: expected ROLE=NAME or ROLE=NAME@URL once per role, e.g. "
                             "skeptic=llama-3-8b")  # fmt: skip
        out[role] = value
    api.parse_roles(out)
    return out


def questions(args) -> list[Question]:
    if not any((args.question_col, args.choices_col, args.answer_col, args.id_col, args.skip_invalid)):
        if Path(args.questions).suffix.lower() == ".parquet":
            raise ValueError(f"{Path(args.questions).name}: a .parquet file is read by its columns: add --choices-col "
                             "(and --question-col, --answer-col as needed; docs/own-questions.md)")  # fmt: skip
        return read_questions(args.questions)
    if not args.choices_col:
        raise ValueError("--choices-col is needed with --question-col, --answer-col, --id-col and --skip-invalid (the "
                         "column holding the options; docs/own-questions.md)")  # fmt: skip
    skipped: Optional[list] = [] if args.skip_invalid else None
    qs = read_columns(args.questions, args.question_col or "question", args.choices_col, args.answer_col, args.id_col,
                      skipped)  # fmt: skip
    if skipped:
        print(f"--skip-invalid: left out {len(skipped)} row(s) that fail the checks, first: {skipped[0]}")
    return qs


def confirm(line: str, args, est) -> None:
    print(line, flush=True)
    usd = est.usd if est.most_usd is None else est.most_usd  # the ceiling: arguments may run to their cap
    if args.yes or (est.calls <= CONFIRM_CALLS and (usd is None or usd <= CONFIRM_USD)):
        return
    if not sys.stdin.isatty():
        raise ValueError(f"the estimate is above ${CONFIRM_USD:g} or {CONFIRM_CALLS:,} calls and stdin cannot answer; "
                         "add --yes to run it (nothing was sent)")  # fmt: skip
    print("send these calls? [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise ValueError("not confirmed: nothing was sent")


def challenging(qs: Sequence[Question], args, name: str, who: dict, out: Path) -> Optional[list[Question]]:
    """The questions whose naive single agent is right in fewer than THRESHOLD of its 5 runs (the subset rule)."""
    missing = [q.id for q in qs if q.answer is None]
    if missing:
        raise ValueError(f"--challenging needs every question's answer; {len(missing)} have none, e.g. {missing[0]!r}")
    with warnings.catch_warnings():  # said in the one line below
        warnings.simplefilter("ignore", api.FailedRecords)
        res = api.run(qs, [subset_config(seed=args.seed)], seed=args.seed, out=out, name=f"{name}-challenging",
                      workers=args.workers, **who)  # fmt: skip
    if line := api.failure_line(res.records, "Rerun the same command", table=False):  # exit 1, as any failed record
        print(f"--challenging, the selection run (the naive agent, 5 runs per question): {line}", file=sys.stderr)
        return None
    keep = {s["id"] for s in map(item_stats, res.records) if s["accuracy"] < THRESHOLD}
    return [q for q in qs if q.id in keep]


def _write_table(results: api.Results, synthetic: bool) -> tuple[Optional[Path], str]:
    """(tables/<run name>.md, also as .csv; None when nothing is scored), the text shown."""
    table = results.table()
    if table.empty:
        return None, "no question has an answer: no accuracy table (the debates are in the transcripts)"
    source = SYNTHETIC_LABEL if synthetic else (results.meta["population"].get("models") or ["?"])[0]
    who = f"{source}: a mechanism study, not evidence about any model" if synthetic else f"model {source}"
    premise = PR.premise_sentence(results.premise(), synthetic, results.split(), population=results.meta["population"])
    text = f"{who} (run {results.name})\n\n{table.to_markdown(index=False)}\n\n{premise}\n"
    *folders, last = results.name.split("/")
    md = outputs("tables", *folders) / f"{last}.md"
    atomic_write(md, text)
    atomic_write(md.with_suffix(".csv"), with_source(table, source).to_csv(index=False))
    return md, text


def run(args) -> int:
    # --name, or the file's stem as one safe path segment ('my questions.csv' -> 'my-questions')
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(args.questions).stem).strip("-.")[:100] or "questions"
    name = safe_segment(stem if args.name is None else args.name, "--name")
    qs = questions(args)  # every row checked before any call
    kw = dict(rounds=args.rounds, agents=args.agents, eta=args.eta, seed=args.seed, roles=roles(args))
    who = dict(synthetic=args.synthetic, model=args.model, base_url=args.base_url, roles=kw["roles"])
    cfgs = api.configs(args.methods, **kw)
    if not args.synthetic:  # what it will send, before anything is sent (the selection run first)
        cfgs = [subset_config(seed=args.seed), *cfgs] if args.challenging else cfgs
        est = api.estimate(qs, cfgs, model=args.model, workers=args.workers, **kw)
        confirm(est.line(), args, est)
    out, since, cap = Path(args.out).expanduser().resolve(), time.time(), parse_max_usd(env(ENV_MAX) or None)
    with outputs_root(out):
        if args.challenging:
            if (kept := challenging(qs, args, name, who, out)) is None:
                return 1
            print(f"--challenging: kept {len(kept)} of {len(qs)} questions (naive single agent right in < "
                  f"{THRESHOLD:.0%} of 5 runs)")  # fmt: skip
            qs = kept
            if not qs:
                return 0
        with warnings.catch_warnings():  # the command says it in its own line, after the table
            warnings.simplefilter("ignore", api.FailedRecords)
            try:
                res = api.run(qs, args.methods, out=out, name=name, workers=args.workers, progress=True, viewer=True,
                              **{**kw, **who})  # fmt: skip
            except (BudgetExceeded, EndpointDown) as e:  # stopped: what it paid, counted as a run that ends says it
                if e.args and (line := paid_line(since, cap)):
                    e.args = (f"{e.args[0]}\n{line}", *e.args[1:])
                raise
        md, text = _write_table(res, args.synthetic)
        page = page_path(res.name)
        paid = None if args.synthetic else paid_line(since, cap)
    print(text)
    failed = sum(r.status != "ok" for r in res)
    print(f"transcripts: {res.run_dir}  ({len(res)} records, {failed} failed)")
    if md is not None:
        print(f"table:       {md}  (and {md.with_suffix('.csv').name})")
    print(f"viewer:      {page}")
    if paid:
        print(paid)
    summary = res.meta.get("summary") or {}
    n, of = int(summary.get("parse_failures") or 0), int(summary.get("commitments") or 0)
    if n > PARSE_FAILURE_LIMIT * max(of, n):  # reproduce's rule (reproduce/cli.py): no beliefs were measured
        print(f"{n} of {max(of, n)} commitments ({100 * n / max(of, n):.0f}%) did not parse after the repair call, "
              f"more than the {PARSE_FAILURE_LIMIT:.0%} a result may have: the table measures no beliefs. Check the "
              "model's replies (commit_raw in the transcripts) and --model / --base-url, then rerun with another "
              f"--out: {res.run_dir.parents[2]} keeps these records and their replies", file=sys.stderr)  # fmt: skip
        return 1
    if line := api.failure_line(res.records, "Rerun the same command"):  # reproduce's failure_lines, for one run
        print(line, file=sys.stderr)
    return 1 if failed else 0


def run_pilot(args) -> int:
    kw = dict(usd=args.usd, k=args.per_benchmark, dry_run=args.dry_run)
    if args.per_benchmark is not None and not pilot.MIN_K <= args.per_benchmark <= pilot.MAX_K:
        raise ValueError(f"--per-benchmark {args.per_benchmark}: need {pilot.MIN_K} to {pilot.MAX_K}")
    if (args.questions is None) == (args.profile is None):
        raise ValueError(f"pilot: give a question file or --profile NAME{', not both' if args.profile else ''}")
    if not math.isfinite(args.usd) or args.usd < 0:
        raise ValueError(f"--usd {args.usd}: need a number of dollars >= 0")
    if args.profile is not None:
        from acemad_utils.experiments.profiles import parse_sets  # noqa: PLC0415 (papermill's start-up: --profile only)

        return pilot.pilot_profile(args.profile, parse_sets(args.set), **kw)
    if not args.model:
        raise ValueError("pilot FILE: --model is required (the endpoint's model; key: OPENAI_API_KEY)")
    return pilot.pilot_file(Path(args.questions), args, **kw)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        api.not_empty(model=args.model, base_url=args.base_url)  # before the estimate prices the default model
        api.check_url(args.base_url, "--base-url")
        return run_pilot(args) if args.command == "pilot" else run(args)
    except RunInterrupted as e:
        print(str(e), file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # outside the run's own handler (endpoint checks, the estimate, the tables' writing)
        print("interrupted; rerun the same command to resume (saved records and cached replies are kept)",
              file=sys.stderr)  # fmt: skip
        return 130
    except (BudgetExceeded, EndpointDown) as e:
        print(redact(str(e)), file=sys.stderr)
        return 1
    except (ValueError, OSError, RuntimeError) as e:  # DataError, UnsafeName, bad options: one line, no traceback
        print(f"error: {redact(str(e))}", file=sys.stderr)
        return 2
    except SystemExit as e:  # a profile's checks (pilot --profile) exit with their message: a bad option too
        if not isinstance(e.code, str):
            raise
        print(f"error: {redact(e.code)}", file=sys.stderr)
        return 2
