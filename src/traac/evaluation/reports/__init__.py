"""Reports over finished evaluations: tables, plots, the HTML report, the step viewer and the
probe report."""
