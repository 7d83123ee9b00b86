node "a" {
  host    = "a.example"
  bastion = node.b
}

node "b" {
  host    = "b.example"
  bastion = node.a
}
