line
