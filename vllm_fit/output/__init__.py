"""What the user sees in the terminal: the live trial line and the summary table."""
