node "a" {
  host = "x"
