node "spark1" {
  host = "10.1.230.180"
  gpus = "many"
}
