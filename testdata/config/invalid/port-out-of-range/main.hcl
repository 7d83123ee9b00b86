node "spark1" {
  host = "a"
  port = 70000
}
