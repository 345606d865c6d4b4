// jemalloc's options for the bridge binary, the one that links jemalloc (meson.build says why it
// does). jemalloc reads this symbol when it starts; MALLOC_CONF in the environment still overrides
// it.
//
// background_thread: freed memory goes back to the system from a thread of jemalloc's own. Without
// it an arena returns its freed pages only when it next allocates, so after a burst on the HTTP I/O
// thread the memory stayed for as long as that thread was quiet (issue 38: a TLS flood took the
// RSS from 20 MB to 49 MB and it stayed there; malloc_trim is glibc's and frees nothing of
// jemalloc's). With it the pages return within about 10 s of being freed (dirty_decay_ms).
extern "C" {
const char* malloc_conf = "background_thread:true";
}
