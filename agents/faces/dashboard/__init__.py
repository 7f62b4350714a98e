"""`eyas ui`: a live dashboard of the runs folder. It reads run folders and records answers to gates the way
`eyas approve` does; it never drives a run, so stopping or crashing it cannot hurt one."""
