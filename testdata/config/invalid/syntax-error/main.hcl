node "spark1" {
  host = "a
}
