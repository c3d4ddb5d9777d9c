"""Running a batch's runs on a cluster's nodes: the node's side, arrival checks, Ray."""
