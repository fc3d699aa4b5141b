// SPDX-License-Identifier: MIT
/*
 * gdrcopy._fastcopy: Mapping.copy_to()/copy_from() as one C call each.
 *
 * ctypes spends most of a small copy converting arguments (0.7 of 0.85 us for
 * 64 B on the H200).  This type holds what a copy needs (the library's two
 * copy functions, the handle, the mapped address and size) and the last host
 * buffer's export, so a repeated copy from the same buffer is a range check
 * and the library call.  It never links libgdrapi: the bindings pass it the
 * addresses of the functions in the library they loaded (ctypes), so it works
 * with whichever libgdrapi.so.2 that is.
 *
 * Built on the stable ABI of Python 3.11 (the buffer protocol entered the
 * limited API there): one binary for every later CPython.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

typedef int (*copy_fn)(unsigned long mh, void *dst, const void *src, size_t size);

/* Copies up to this size keep the GIL: releasing it costs more than they take. */
#define GIL_KEPT_MAX (64 * 1024)

/* The bindings' exception classes and their buffer-error helper, set by configure(). */
static PyObject *closed_error;
static PyObject *gdr_error;
static PyObject *host_buffer_error;

struct export {
	PyObject *obj;	/* NULL: none held */
	Py_buffer view;
};

typedef struct {
	PyObject_HEAD
	copy_fn to_mapping;
	copy_fn from_mapping;
	unsigned long mh;
	char *va;
	Py_ssize_t size;	/* -1 once closed */
	PyObject *closed_why;	/* str, set by close() */
	struct export src;
	struct export dst;
} Copier;

/* Py_XSETREF is not in the limited API. */
static void replace_ref(PyObject **slot, PyObject *value)
{
	PyObject *old = *slot;

	Py_INCREF(value);
	*slot = value;
	Py_XDECREF(old);
}

static void export_release(struct export *e)
{
	PyObject *obj = e->obj;

	if (obj) {
		e->obj = NULL;
		PyBuffer_Release(&e->view);
		Py_DECREF(obj);
	}
}

/* The export of obj, reusing the held one when obj is the same object. */
static int export_get(struct export *e, PyObject *obj, int writable, const char *what)
{
	int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);

	if (e->obj == obj)
		return 0;
	export_release(e);
	if (PyObject_GetBuffer(obj, &e->view, flags) < 0) {
		PyObject *result;

		/* The bindings' own checks say what is wrong and what to do. */
		PyErr_Clear();
		result = PyObject_CallFunction(host_buffer_error, "Ois", obj, writable, what);
		if (result) {
			Py_DECREF(result);
			PyErr_Format(PyExc_BufferError, "%s: cannot export the host buffer", what);
		}
		return -1;
	}
	Py_INCREF(obj);
	e->obj = obj;
	return 0;
}

static int raise_closed(Copier *self)
{
	PyErr_SetObject(closed_error, self->closed_why ? self->closed_why : Py_None);
	return -1;
}

/* (buffer, offset=0, size=None) of a fastcall, parsed. */
static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *what,
		      PyObject **buffer, Py_ssize_t *offset, PyObject **size)
{
	PyObject *slots[3] = { NULL, NULL, NULL };
	static const char *const names[3] = { "buffer", "offset", "size" };
	Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
	Py_ssize_t i;

	if (nargs > 3) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most 3 arguments (%zd given)", what, nargs);
		return -1;
	}
	for (i = 0; i < nargs; i++)
		slots[i] = args[i];
	for (i = 0; i < nkw; i++) {
		PyObject *key = PyTuple_GetItem(kwnames, i);
		int j, found = -1;

		for (j = 0; j < 3; j++)
			if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
				found = j;
		/* copy_to's buffer is called src, copy_from's dst. */
		if (found < 0 && (PyUnicode_CompareWithASCIIString(key, "src") == 0 ||
				  PyUnicode_CompareWithASCIIString(key, "dst") == 0))
			found = 0;
		if (found < 0) {
			PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", what, key);
			return -1;
		}
		if (slots[found]) {
			PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", what, names[found]);
			return -1;
		}
		slots[found] = args[nargs + i];
	}
	if (!slots[0]) {
		PyErr_Format(PyExc_TypeError, "%s() missing the host buffer argument", what);
		return -1;
	}
	*buffer = slots[0];
	*offset = 0;
	if (slots[1]) {
		*offset = PyLong_AsSsize_t(slots[1]);
		if (*offset == -1 && PyErr_Occurred())
			return -1;
	}
	*size = slots[2] && slots[2] != Py_None ? slots[2] : NULL;
	return 0;
}

static PyObject *copy(Copier *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int to_gpu)
{
	const char *what = to_gpu ? "copy_to" : "copy_from";
	struct export *e = to_gpu ? &self->src : &self->dst;
	PyObject *buffer, *size_arg;
	Py_ssize_t offset, n;
	char *mapped;
	int rc;

	if (nargs == 1 && !kwnames) {
		buffer = args[0];
		offset = 0;
		size_arg = NULL;
	} else if (parse_args(args, nargs, kwnames, what, &buffer, &offset, &size_arg) < 0) {
		return NULL;
	}
	if (self->size < 0)
		return raise_closed(self), NULL;
	if (export_get(e, buffer, !to_gpu, what) < 0)
		return NULL;
	n = e->view.len;
	if (size_arg) {
		Py_ssize_t size = PyLong_AsSsize_t(size_arg);

		if (size == -1 && PyErr_Occurred())
			return NULL;
		if (size < 0 || size > n) {
			PyErr_Format(PyExc_ValueError, "%s: size %zd is outside the %zd-byte host buffer", what, size, n);
			return NULL;
		}
		n = size;
	}
	if (offset < 0 || n > self->size - offset) {
		PyErr_Format(PyExc_ValueError, "%s: %zd bytes at offset %zd do not fit the %zd-byte mapping", what, n,
			     offset, self->size);
		return NULL;
	}
	if (!n)
		Py_RETURN_NONE;
	mapped = self->va + offset;
	if (n <= GIL_KEPT_MAX) {
		rc = to_gpu ? self->to_mapping(self->mh, mapped, e->view.buf, (size_t)n)
			    : self->from_mapping(self->mh, e->view.buf, mapped, (size_t)n);
	} else {
		/*
		 * Without the GIL another thread may replace the cached export: this
		 * copy holds one of its own (cheap next to copying 64 KiB or more).
		 */
		Py_buffer own;
		PyObject *obj = e->obj;

		Py_INCREF(obj);
		if (PyObject_GetBuffer(obj, &own, PyBUF_ANY_CONTIGUOUS | (to_gpu ? 0 : PyBUF_WRITABLE)) < 0) {
			Py_DECREF(obj);
			return NULL;
		}
		Py_BEGIN_ALLOW_THREADS
		rc = to_gpu ? self->to_mapping(self->mh, mapped, own.buf, (size_t)n)
			    : self->from_mapping(self->mh, own.buf, mapped, (size_t)n);
		Py_END_ALLOW_THREADS
		PyBuffer_Release(&own);
		Py_DECREF(obj);
	}
	if (rc) {
		PyObject *error = PyObject_CallFunction(gdr_error, "is", rc,
							to_gpu ? "gdr_copy_to_mapping" : "gdr_copy_from_mapping");

		if (error) {
			PyErr_SetObject(gdr_error, error);
			Py_DECREF(error);
		}
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *copier_copy_to(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	return copy((Copier *)self, args, nargs, kwnames, 1);
}

static PyObject *copier_copy_from(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	return copy((Copier *)self, args, nargs, kwnames, 0);
}

/* close(why): every later copy raises ClosedError(why); the held exports are released. */
static PyObject *copier_close(PyObject *obj, PyObject *why)
{
	Copier *self = (Copier *)obj;

	self->size = -1;
	replace_ref(&self->closed_why, why);
	export_release(&self->src);
	export_release(&self->dst);
	Py_RETURN_NONE;
}

/* forget(): release the held exports (a temporary buffer must not stay exported). */
static PyObject *copier_forget(PyObject *obj, PyObject *unused)
{
	Copier *self = (Copier *)obj;

	(void)unused;
	export_release(&self->src);
	export_release(&self->dst);
	Py_RETURN_NONE;
}

static PyObject *copier_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
	unsigned long long to_addr, from_addr, va;
	unsigned long mh;
	Py_ssize_t size;
	Copier *self;

	(void)kwargs;
	if (!PyArg_ParseTuple(args, "KKkKn:Copier", &to_addr, &from_addr, &mh, &va, &size))
		return NULL;
	if (!to_addr || !from_addr || !va || size < 0) {
		PyErr_SetString(PyExc_ValueError, "Copier(to_fn, from_fn, handle, address, size): null address");
		return NULL;
	}
	if (!closed_error || !gdr_error || !host_buffer_error) {
		PyErr_SetString(PyExc_RuntimeError, "gdrcopy._fastcopy.configure() was not called");
		return NULL;
	}
	self = (Copier *)PyType_GenericAlloc(type, 0);
	if (!self)
		return NULL;
	self->to_mapping = (copy_fn)(uintptr_t)to_addr;
	self->from_mapping = (copy_fn)(uintptr_t)from_addr;
	self->mh = mh;
	self->va = (char *)(uintptr_t)va;
	self->size = size;
	return (PyObject *)self;
}

static void copier_dealloc(PyObject *obj)
{
	Copier *self = (Copier *)obj;
	PyTypeObject *type = Py_TYPE(obj);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);

	export_release(&self->src);
	export_release(&self->dst);
	Py_CLEAR(self->closed_why);
	tp_free(obj);
	Py_DECREF(type);
}

static PyMethodDef copier_methods[] = {
	{ "copy_to", (PyCFunction)(void (*)(void))copier_copy_to, METH_FASTCALL | METH_KEYWORDS,
	  "copy_to(src, offset=0, size=None): host buffer -> mapping" },
	{ "copy_from", (PyCFunction)(void (*)(void))copier_copy_from, METH_FASTCALL | METH_KEYWORDS,
	  "copy_from(dst, offset=0, size=None): mapping -> host buffer" },
	{ "close", copier_close, METH_O, "close(why): refuse every later copy" },
	{ "forget", copier_forget, METH_NOARGS, "forget(): release the held host-buffer exports" },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot copier_slots[] = {
	{ Py_tp_new, (void *)copier_new },
	{ Py_tp_dealloc, (void *)copier_dealloc },
	{ Py_tp_methods, copier_methods },
	{ Py_tp_doc, (void *)"Copier(to_fn, from_fn, handle, address, size): the copies of one mapping" },
	{ 0, NULL },
};

static PyType_Spec copier_spec = {
	.name = "gdrcopy._fastcopy.Copier",
	.basicsize = sizeof(Copier),
	.itemsize = 0,
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = copier_slots,
};

static PyObject *configure(PyObject *module, PyObject *args)
{
	PyObject *closed, *error, *helper;

	(void)module;
	if (!PyArg_ParseTuple(args, "OOO:configure", &closed, &error, &helper))
		return NULL;
	replace_ref(&closed_error, closed);
	replace_ref(&gdr_error, error);
	replace_ref(&host_buffer_error, helper);
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{ "configure", configure, METH_VARARGS,
	  "configure(ClosedError, GdrError, host_buffer_check): the bindings' error types" },
	{ NULL, NULL, 0, NULL },
};

static int module_exec(PyObject *module)
{
	PyObject *type = PyType_FromSpec(&copier_spec);

	if (!type)
		return -1;
	if (PyModule_AddObject(module, "Copier", type) < 0) {
		Py_DECREF(type);
		return -1;
	}
	return PyModule_AddIntConstant(module, "GIL_KEPT_MAX", GIL_KEPT_MAX);
}

static PyModuleDef_Slot module_slots[] = {
	{ Py_mod_exec, (void *)module_exec },
	{ 0, NULL },
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "gdrcopy._fastcopy",
	.m_doc = "The compiled copy calls of gdrcopy.Mapping (see gdrcopy._core).",
	.m_size = 0,
	.m_methods = module_methods,
	.m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__fastcopy(void);

PyMODINIT_FUNC PyInit__fastcopy(void)
{
	return PyModuleDef_Init(&module_def);
}
