node "spark-a" {
  host = "10.1.230.180"
  user = "ubuntu"
}
