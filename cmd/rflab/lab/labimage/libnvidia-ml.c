/*
 * libnvidia-ml.so.1 of the rayform lab image: the part of NVIDIA's NVML that
 * Ray 2.53 uses to count a node's GPUs, answering from the lab node's
 * simulated hardware instead of a driver.
 *
 * Ray counts NVIDIA GPUs in ray/_private/accelerators/nvidia_gpu.py
 * (NvidiaGPUAcceleratorManager.get_current_node_num_accelerators and
 * get_current_node_accelerator_type): its vendored pynvml dlopens
 * "libnvidia-ml.so.1", calls nvmlInitWithFlags, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2 and nvmlDeviceGetName, and counts 0 GPUs
 * when nvmlInit fails. On a GPU host the NVIDIA container toolkit mounts the
 * driver's libnvidia-ml.so.1 into --gpus containers; in the lab the
 * container toolkit's hook (simnode's nvidia-container-runtime-hook) copies
 * the node's hardware file to /etc/simnode/hardware.json in --gpus
 * containers, and this library reads it. Without that file (a container
 * started without --gpus, a node without the toolkit) nvmlInit fails with
 * NVML_ERROR_DRIVER_NOT_LOADED, as the real library does with no driver,
 * and Ray counts 0 GPUs. CUDA_VISIBLE_DEVICES is Ray's business, not NVML's
 * (real NVML ignores it too).
 *
 * Built by engine/lab/ray.go with the machine's C compiler into the lab's
 * Ray layer. Functions not here are absent, as in an old driver: pynvml
 * raises NVMLError_FunctionNotFound for them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 64
#define FIELD 96

struct gpu {
	int index;
	char name[FIELD];
	char uuid[FIELD];
	unsigned long long memory_mib;
};

typedef struct gpu *nvmlDevice_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

static struct gpu gpus[MAX_GPUS];
static unsigned int ngpus;
static int initialized;
static char driver_version[FIELD] = "580.95.05";

/* hardware_path: $SIMNODE_HARDWARE, else /etc/simnode/hardware.json, as
 * simnode's nvidia-smi reads it. */
static const char *hardware_path(void)
{
	const char *p = getenv("SIMNODE_HARDWARE");
	return p && *p ? p : "/etc/simnode/hardware.json";
}

/* read_string copies the JSON string starting at p (just after its opening
 * quote) into out and returns the position after its closing quote. */
static const char *read_string(const char *p, char *out, size_t n)
{
	size_t i = 0;
	for (; *p && *p != '"'; p++) {
		if (*p == '\\' && p[1])
			p++;
		if (out && i + 1 < n)
			out[i++] = *p;
	}
	if (out && n)
		out[i] = 0;
	return *p ? p + 1 : p;
}

/* value_of finds "key": "string" at the top level of the object that starts
 * at obj and ends at end, and copies the string. */
static int value_of(const char *obj, const char *end, const char *key, char *out, size_t n)
{
	int depth = 0;
	char k[FIELD];
	for (const char *p = obj; p < end && *p; p++) {
		if (*p == '"') {
			p = read_string(p + 1, k, sizeof k);
			const char *q = p;
			while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
				q++;
			if (depth == 1 && *q == ':' && strcmp(k, key) == 0) {
				q++;
				while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
					q++;
				if (*q == '"') {
					read_string(q + 1, out, n);
					return 1;
				}
				if (out && n) {
					size_t i = 0;
					while (q < end && *q && *q != ',' && *q != '}' && *q != '\n' && i + 1 < n)
						out[i++] = *q++;
					out[i] = 0;
				}
				return 1;
			}
			p--;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
	}
	return 0;
}

/* load parses the "gpus" array and "driver_version" of the hardware file. */
static nvmlReturn_t load(void)
{
	FILE *f = fopen(hardware_path(), "r");
	if (!f)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	static char buf[1 << 20];
	size_t len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = 0;
	char v[FIELD];
	if (value_of(buf, buf + len, "driver_version", v, sizeof v) && v[0])
		strcpy(driver_version, v);
	ngpus = 0;
	const char *p = strstr(buf, "\"gpus\"");
	if (!p)
		return NVML_SUCCESS;
	p = strchr(p, '[');
	if (!p)
		return NVML_SUCCESS;
	int depth = 0;
	const char *obj = NULL;
	for (p++; *p; p++) {
		if (*p == '"') {
			p = read_string(p + 1, NULL, 0) - 1;
			continue;
		}
		if (*p == '{' || *p == '[') {
			if (depth++ == 0)
				obj = p;
		} else if (*p == '}' || *p == ']') {
			if (depth == 0)
				break; /* end of the array */
			if (--depth == 0 && obj && ngpus < MAX_GPUS) {
				struct gpu *g = &gpus[ngpus];
				memset(g, 0, sizeof *g);
				g->index = (int)ngpus;
				if (!value_of(obj, p + 1, "name", g->name, sizeof g->name) || !g->name[0])
					strcpy(g->name, "NVIDIA GPU");
				if (!value_of(obj, p + 1, "uuid", g->uuid, sizeof g->uuid) || !g->uuid[0])
					snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-0000-0000-%012u", ngpus);
				if (value_of(obj, p + 1, "memory_mib", v, sizeof v))
					g->memory_mib = strtoull(v, NULL, 10);
				ngpus++;
			}
		}
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	nvmlReturn_t r = load();
	if (r == NVML_SUCCESS)
		initialized++;
	return r;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	initialized--;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || i >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = &gpus[i];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *dev)
{
	return nvmlDeviceGetHandleByIndex_v2(i, dev);
}

static nvmlReturn_t copy_out(const char *s, char *out, unsigned int n)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(out, s);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int n)
{
	return dev ? copy_out(dev->name, name, n) : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int n)
{
	return dev ? copy_out(dev->uuid, uuid, n) : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || !index)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned int)dev->index;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int n)
{
	return copy_out(driver_version, version, n);
}

/* nvmlDeviceGetMemoryInfo: a GPU with unified memory (memory_mib 0, the
 * GB10) has no framebuffer of its own; the real driver answers Not
 * Supported there, as nvidia-smi's [N/A] shows. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || !m)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (dev->memory_mib == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	m->total = dev->memory_mib << 20;
	m->used = 0;
	m->free = m->total;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || !u)
		return NVML_ERROR_INVALID_ARGUMENT;
	u->gpu = 0;
	u->memory = 0;
	return NVML_SUCCESS;
}
