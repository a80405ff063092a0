"""Helpers every stage may use: paths of the checkout, free ports, CPU lists, log tails, tool installs,
never-orphaned child processes, run profiles. Imports nothing else of polyperf but `errors`."""
