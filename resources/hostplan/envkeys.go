package hostplan

// EnvKeys returns the container environment variables whose values are
// not secret and matter to the plan (observe.HostSpec.EnvKeys, the
// observation's allow-list): the networking binding of Ray,
// vLLM, NCCL, Gloo, TensorPipe and UCX, Ray's memory monitor, and
// VLLM_CONFIG_ROOT (which rayform sets in every container).
func EnvKeys() []string {
	return []string{
		"GLOO_SOCKET_IFNAME",
		"MASTER_ADDR",
		"MASTER_PORT",
		"NCCL_DEBUG",
		"NCCL_IB_DISABLE",
		"NCCL_IB_GID_INDEX",
		"NCCL_IB_HCA",
		"NCCL_SOCKET_IFNAME",
		"OMPI_MCA_btl_tcp_if_include",
		"RAY_ADDRESS",
		"RAY_memory_monitor_refresh_ms",
		"RAY_memory_usage_threshold",
		"TP_SOCKET_IFNAME",
		"UCX_NET_DEVICES",
		"VLLM_CONFIG_ROOT",
		"VLLM_HOST_IP",
		"VLLM_PORT",
	}
}
