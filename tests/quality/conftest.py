# data/ holds packages and repos that the tests copy and run themselves.
collect_ignore_glob = ["data/*"]
