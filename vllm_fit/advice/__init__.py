"""What to change when nothing fits or the fit is short: the diagnosis in numbers, and --explore."""
