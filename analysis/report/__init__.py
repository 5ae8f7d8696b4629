"""Phase 6, reporting: the end-of-sweep conclusion, the winner's explanation and recommendations, plots, the HTML
report, the export of the winner, MLflow tracking, the search and plan summaries."""
