"""Phase 0, the typed core every other phase imports: the Layout and its one label, trial states and failure kinds,
the trial record, the objective and the ranking, the names of backends/executors/precisions, the errors and the
reporter. Imports nothing else of the project (docs/architecture.md)."""
