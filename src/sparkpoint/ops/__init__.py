"""The operator's tools: the `sparkpoint` command (cli/), the demo (demo/), failover drills
(drills/) and local servers for development, tests and the demo (devcluster/)."""
