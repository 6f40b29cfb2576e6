/*
 * memory_objects: what Python's heap holds, by walking it with the GIL —
 * objects by type, tensors by device and dtype, torch's CUDA allocator,
 * and the list of live tensors (python.tensors).
 *
 * The walk: gc.get_objects() (every object the garbage collector tracks:
 * containers, class instances, tensors), each counted by type with its
 * sys.getsizeof; plus the objects those refer to that the collector does
 * not track (int, float, str, bytes...), each counted once (a set of the
 * addresses seen, at most MEMORY_SEEN_MAX; past it they are no longer
 * counted and the report says it is incomplete).  Sizes are shallow: a
 * list's size is its own array, not its items'.  Tensor bytes are
 * nelement() * element_size() of each tensor: views of one storage count
 * each (a parameter and its .grad are two tensors).
 *
 * Bounded: at most MEMORY_WALK_MAX objects, and a time budget checked
 * every few thousand objects (and pygil_should_stop()): past either the
 * walk ends early and says so.  Allocations are freed before returning.
 *
 * Threads: the GIL held (a pygil call), on a GIL thread.
 */
#ifndef MEMORY_OBJECTS_H
#define MEMORY_OBJECTS_H

#include <stddef.h>
#include <stdint.h>

#define MEMORY_WALK_MAX 20000000    /* objects walked at most */
#define MEMORY_SEEN_MAX (1u << 21)  /* untracked objects told apart */
#define MEMORY_TYPES_MAX 16384	    /* distinct types counted */
#define MEMORY_TOP_MAX 1000	    /* types in each top list */
#define MEMORY_TENSOR_KINDS_MAX 256 /* device/dtype pairs */
#define MEMORY_CUDA_MAX 64	    /* devices reported */
#define MEMORY_TENSORS_MAX 100000   /* rows of python.tensors */
#define MEMORY_NAME_MAX 160	    /* bytes of a type or holder name */

struct memory_type_stat {
	char name[MEMORY_NAME_MAX]; /* "dict", "torch.Tensor", "__main__.Foo" */
	uint64_t count, bytes;
};

struct memory_tensor_stat {
	char device[32]; /* "cpu", "cuda:0" */
	char dtype[32];	 /* "torch.float32" */
	uint64_t count, bytes;
};

struct memory_cuda {
	int device;
	double allocated, max_allocated, reserved, max_reserved; /* MB */
};

struct memory_report {
	int complete;	    /* every object was seen and counted */
	uint64_t objects;   /* tracked objects walked */
	uint64_t untracked; /* untracked objects counted */
	uint64_t bytes;	    /* their sizes, summed */
	uint64_t py_blocks; /* sys.getallocatedblocks() */
	double elapsed_ms;
	struct memory_type_stat *by_count, *by_size; /* owned */
	size_t ntop;				     /* entries in each */
	struct memory_tensor_stat *tensors;	     /* owned */
	size_t ntensors;
	int torch; /* torch is imported */
	struct memory_cuda cuda[MEMORY_CUDA_MAX];
	size_t ncuda; /* 0: CUDA not initialised */
};

/* Walks the heap and fills out (release with memory_report_release),
 * the top `top` types by count and by size.  budget_ms bounds the walk.
 * Returns 0 or -ENOMEM / -EIO (gc unavailable) with err. */
int memory_objects_report(size_t top, int budget_ms, struct memory_report *out,
			  char *err, size_t errlen);

void memory_report_release(struct memory_report *r);

/* One live tensor (python.tensors). */
struct memory_tensor {
	uint64_t id;	/* id() */
	char shape[64]; /* "[64, 32]" */
	char dtype[32];
	char device[32];
	uint64_t bytes;
	int requires_grad;
	char grad_fn[64];	      /* "AddmmBackward0", or "" */
	char holder[MEMORY_NAME_MAX]; /* "model.encoder.0.weight",
					 "losses[3]", "train:x", or "" */
};

/*
 * Lists the live tensors (at most MEMORY_TENSORS_MAX), with who holds
 * them where known: a module's parameter or buffer (named from its root
 * module, itself named by a global of __main__ or by its class), its
 * .grad, or a variable (a global of __main__, or a local of a running
 * function as "func:name"), or an item of a list, tuple or dict such a
 * variable holds ("losses[3]").  *out is malloc'd (caller frees); *n its
 * length; *complete is cleared when the list was cut.  0, -ENOENT (torch
 * is not imported) or -ENOMEM, with err.
 */
int memory_objects_tensors(int budget_ms, struct memory_tensor **out, size_t *n,
			   int *complete, char *err, size_t errlen);

#endif
