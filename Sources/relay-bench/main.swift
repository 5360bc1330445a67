// relay-bench: the TURN load generator (issue #6). Work in progress.
print("relay-bench: not implemented yet")
