"""Phase 5, reading and judging logs (pure): the readers of every framework's log (read_log, parse_*), the steady
state, plausibility, the failure classifier and its pattern tables, and the judge that turns a finished job into
ledger changes. The sweep loop never imports this package: the command line hands the judge to it."""
