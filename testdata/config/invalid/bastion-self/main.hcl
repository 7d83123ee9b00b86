node "a" {
  host    = "a.example"
  bastion = node.a
}
