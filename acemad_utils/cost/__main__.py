from acemad_utils.cost.estimate import main

raise SystemExit(main())
