"""An IPU-Model analogue: build Poplar-style graph programs, compile, run, and write reports."""
