"""experiments: what the notebooks run (registry, params, profiles, paper_tables), the inputs they share (setup,
subsets: the challenging subsets) and running it (runner: resumable transcripts + meta.json)."""
