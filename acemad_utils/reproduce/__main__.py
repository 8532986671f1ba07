from acemad_utils.reproduce.cli import main

raise SystemExit(main())
