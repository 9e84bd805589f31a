/* Preloaded into redis-server before libfaketime. Debian's redis-server links jemalloc, whose
 * initialisation calls clock_gettime, which libfaketime intercepts before it is ready itself:
 * the server deadlocks or aborts ("Cannot recover from unexpected recursive calls to
 * clock_gettime()", wolfcw/libfaketime#130). Routing the allocator to glibc's own functions
 * avoids jemalloc's path entirely. Redis calls the standard names (je_ prefixes are not
 * exported by Debian's build), so these definitions win over jemalloc's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* ptr, size_t size);
extern void __libc_free(void* ptr);
extern void* __libc_memalign(size_t alignment, size_t size);


void* malloc(size_t size) { return __libc_malloc(size); }
void* calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
void* realloc(void* ptr, size_t size) { return __libc_realloc(ptr, size); }
void free(void* ptr) { __libc_free(ptr); }
void* memalign(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void* aligned_alloc(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }

int posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (p == NULL)
    return 12; /* ENOMEM */
  *out = p;
  return 0;
}

/* glibc has no __libc_ alias for this one: look it up in libc itself (not RTLD_NEXT, which would
 * find jemalloc's). Only called long after start-up, so dlsym's own allocations are harmless. */
size_t malloc_usable_size(void* ptr) {
  typedef size_t (*usable_fn)(void*);
  static usable_fn glibc_usable = NULL;
  if (glibc_usable == NULL) {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc != NULL)
      glibc_usable = (usable_fn)dlsym(libc, "malloc_usable_size");
  }
  return ptr == NULL || glibc_usable == NULL ? 0 : glibc_usable(ptr);
}
