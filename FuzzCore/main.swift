// core-fuzz: libFuzzer target over RelayCore (issue #8). Work in progress.
print("core-fuzz: not implemented yet")
