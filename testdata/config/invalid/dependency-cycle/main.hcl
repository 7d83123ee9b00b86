locals {
  a = local.b
  b = "${local.c}-x"
  c = local.a
}
