node "spark1" {
  host = formatt("10.1.230.%d", 180)
}
