/*
 * torch_names: the qualified names of torch modules
 * ("encoder.layers.0.self_attn"), cached per module object, as small ids
 * that the recorder thread can turn back into text without the GIL.
 *
 * A module is named from its root: the first time a module that is not
 * yet known is called outside any traced module, it is a root — unless
 * the thread's Python stack shows another module's call running around it
 * (a Module._call_impl frame: tracing was switched on in the middle of
 * that module's forward), which is then walked as the root instead — and
 * its
 * named_modules() gives every module under it its qualified name (the
 * root itself is named by its class, e.g. "MLP"; a loss module called on
 * its own is a root too, e.g. "MSELoss").  A module first seen inside
 * another one but not under the root's named_modules() (made after the
 * walk, or borrowed from elsewhere) is walked for again once, then named
 * "<parent>.<Class>".  Each module also gets an index, its order of
 * discovery (root first, then named_modules() order): the same on every
 * rank that runs the same model, which module sampling relies on.
 *
 * The cache holds weak references: a module that dies is not kept alive,
 * and a new module that happens to get a dead one's address is not taken
 * for it.  A name already given is kept (a later root walk does not
 * rename a module: wrapping a model in another keeps the names it had),
 * except a root's: a module named as a root only because nothing traced
 * ran around it (tracing switched on in the middle of its parent's
 * forward) takes its real name from the first walk that finds it.
 *
 * Caps: TORCH_MODULES_MAX modules cached (past it, dead entries are swept;
 * then modules are named by class without caching), TORCH_NAMES_MAX
 * distinct names (past it, the id TORCH_NAME_OTHER, "(other)"),
 * TORCH_NAME_LEN bytes per name.
 *
 * Threads: GIL held for everything but torch_names_text, which any
 * thread may call for any id it got.
 */
#ifndef TORCH_NAMES_H
#define TORCH_NAMES_H

#include <stdint.h>

struct _object;

#define TORCH_MODULES_MAX 16384
#define TORCH_NAMES_MAX 65536
#define TORCH_NAME_LEN 256
#define TORCH_NAME_OTHER 0 /* "(other)": ids from 1 are real names */

struct torch_module {
	int32_t name;  /* name id */
	int32_t index; /* order of discovery */
};

/*
 * Names module.  root: the outermost module being run around this call
 * (NULL: none, module is a root itself); parent: the name id of the
 * innermost one (for the fallback name).  Never raises (a Python error on
 * the way is cleared and the module named by its class).  Returns 0, or
 * -ENOMEM (out is then the class name, uncached).
 */
int torch_names_lookup(struct _object *module, struct _object *root,
		       int32_t parent, struct torch_module *out);

/* Interns a name; returns its id (TORCH_NAME_OTHER past the cap). */
int32_t torch_names_intern(const char *name);

/* The text of an id ("(other)" for an unknown one).  Any thread; the
 * text stays valid for the life of the process. */
const char *torch_names_text(int32_t id);

/* Drops the module cache and its weak references (names stay).  GIL. */
void torch_names_clear(void);

/* Modules cached now (any thread; a snapshot). */
int torch_names_modules(void);

#endif
