/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots serialised by a forked child (docs/persist.md "Snapshots without a stall").
 *
 * A shard lcore that serialises a state of a million orders or users itself stalls for
 * hundreds of milliseconds to seconds (tests/bench/app/snapshot_stall). fork() gives a
 * child the state exactly as it is at that instant, copy-on-write, and the parent goes on at
 * once: the kernel copies page tables, not pages, and afterwards a page the parent writes is
 * copied once (the child keeps the old one). The child serialises into memory both share
 * (MAP_SHARED: the parent sees its writes), stores the length and a flag in a shared slot,
 * and _exits. This is Redis's BGSAVE, for the same reason.
 *
 * The state the child reads must be private memory (MAP_PRIVATE: copied on write); DPDK's
 * memory is shared hugetlbfs on a production host (the parent's later writes would show in
 * the child's image), so the app keeps service state in pst_mem_private. Asking for
 * transparent huge pages there makes fork copy one entry per 2 MB rather than 512.
 *
 * The child of a multi-threaded process may only do what is async-signal-safe: it runs the
 * pure serialiser (memcpy, hashing) and a few system calls, allocates nothing, takes no lock.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "persist/persist.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36's headers predate it */
#endif

#define WAIT_EVERY_NS 10000000u /* waitpid while the child runs: a crash is seen this late */
#define REAP_EVERY_NS 1000000u  /* waitpid for a child whose result was collected */
#define SLOT_DONE 1u

struct pst_fork_slot {
	_Atomic uint32_t done; /* SLOT_DONE once len and child_ns are written */
	uint32_t reserved;
	uint64_t len;          /* bytes the serialiser wrote (0: did not fit) */
	uint64_t child_ns;     /* its time */
};

static uint64_t
mono_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t
page_round(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (size + page - 1) / page * page;
}

void *
pst_mem_private(size_t size)
{
	size = page_round(size);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* Before the pages exist, so the first touch can take a huge one (ignored when the
	 * host has transparent huge pages off: fork then copies 4 KiB entries). */
	(void)madvise(p, size, MADV_HUGEPAGE);
	/* Touch every page now: no page fault later in the shard's cycle. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < size; off += page)
		((volatile uint8_t *)p)[off] = 0;
	return p;
}

void *
pst_mem_shared(size_t size)
{
	size = page_round(size);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void
pst_mem_free(void *p, size_t size)
{
	if (p != NULL)
		munmap(p, page_round(size));
}

int
pst_mem_collapse(void *p, size_t size)
{
	/* Only whole 2 MiB ranges can be huge pages. */
	const uintptr_t huge = (uintptr_t)2 << 20;
	uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
	uintptr_t hi = ((uintptr_t)p + size) & ~(huge - 1);
	if (hi <= lo)
		return 0;
	return madvise((void *)lo, hi - lo, MADV_COLLAPSE) == 0 ? 0 : -errno;
}

int
pst_fork_init(struct pst_fork *f)
{
	memset(f, 0, sizeof(*f));
	void *p = pst_mem_shared(sizeof(struct pst_fork_slot));
	if (p == NULL)
		return -errno;
	f->slot = p;
	return 0;
}

static void
reap(struct pst_fork *f, bool block)
{
	if (f->pid <= 0)
		return;
	int st;
	pid_t r;
	do
		r = waitpid(f->pid, &st, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == f->pid || (r < 0 && errno == ECHILD)) {
		f->pid = 0;
		f->result = false;
	}
}

void
pst_fork_kill(struct pst_fork *f)
{
	if (f->pid <= 0)
		return;
	kill(f->pid, SIGKILL);
	reap(f, true);
}

void
pst_fork_fini(struct pst_fork *f)
{
	pst_fork_kill(f);
	pst_mem_free(f->slot, sizeof(struct pst_fork_slot));
	f->slot = NULL;
}

/* In the child: async-signal-safe calls and the serialiser only. */
__attribute__((noreturn)) static void
child(struct pst_fork_slot *slot, pid_t parent, pst_serialize_fn *fn, const void *svc,
      void *buf, size_t cap, size_t populate, const void *cpus, size_t cpus_size, int nice)
{
	/* Die with the parent; it may have died before the call. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(2);
	/* A terminal's Ctrl-C or a TERM to the group ends the child too (the parent's
	 * handlers only set flags the child never reads). */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
	if (cpus != NULL)
		(void)sched_setaffinity(0, cpus_size, cpus);
	if (nice != 0)
		(void)setpriority(PRIO_PROCESS, 0, nice);
	uint64_t t0 = mono_ns(CLOCK_MONOTONIC);
	if (populate != 0) {
		/* Best effort (Linux 5.14): a kernel without it faults page by page. */
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t lo = (uintptr_t)buf & ~(page - 1);
		uintptr_t hi = (uintptr_t)buf + (populate < cap ? populate : cap);
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
	}
	size_t len = fn(svc, buf, cap);
	slot->len = len;
	slot->child_ns = mono_ns(CLOCK_MONOTONIC) - t0;
	atomic_store_explicit(&slot->done, SLOT_DONE, memory_order_release);
	_exit(0);
}

int
pst_fork_start(struct pst_fork *f, pst_serialize_fn *fn, const void *svc, void *buf, size_t cap,
	       const void *cpus, size_t cpus_size, int nice)
{
	if (f->pid > 0)
		return -EBUSY;
	atomic_store_explicit(&f->slot->done, 0, memory_order_relaxed);
	f->slot->len = 0;
	f->slot->child_ns = 0;
	pid_t parent = getpid();
	uint64_t t0 = mono_ns(CLOCK_MONOTONIC);
	pid_t pid = fork();
	if (pid == 0)
		child(f->slot, parent, fn, svc, buf, cap, f->populate, cpus, cpus_size, nice);
	uint64_t t1 = mono_ns(CLOCK_MONOTONIC);
	if (pid < 0) {
		f->failures++;
		return -errno;
	}
	f->pid = pid;
	f->result = false;
	f->started_ns = t0;
	f->fork_ns = t1 - t0;
	if (f->fork_ns > f->fork_ns_max)
		f->fork_ns_max = f->fork_ns;
	f->next_wait_ns = mono_ns(CLOCK_MONOTONIC_COARSE) + WAIT_EVERY_NS;
	f->forks++;
	return 0;
}

enum pst_fork_state
pst_fork_poll(struct pst_fork *f, size_t *len, int *status)
{
	if (f->pid <= 0)
		return PST_FORK_IDLE;
	uint64_t now = mono_ns(CLOCK_MONOTONIC_COARSE);
	if (f->result) {
		/* Collected: only the reaping is left. A big image takes the child a while to
		 * tear down: never wait for it, and ask at most every REAP_EVERY_NS (the caller
		 * polls every cycle; a system call each time would be a cost on its hot path). */
		if (now >= f->next_wait_ns) {
			f->next_wait_ns = now + REAP_EVERY_NS;
			reap(f, false);
		}
		return PST_FORK_IDLE;
	}
	if (atomic_load_explicit(&f->slot->done, memory_order_acquire) == SLOT_DONE) {
		*len = (size_t)f->slot->len;
		f->child_ns = f->slot->child_ns;
		f->result = true;
		f->next_wait_ns = now + REAP_EVERY_NS;
		reap(f, false);
		return PST_FORK_DONE;
	}
	if (now < f->next_wait_ns)
		return PST_FORK_RUNNING;
	f->next_wait_ns = now + WAIT_EVERY_NS;
	int st = 0;
	pid_t r = waitpid(f->pid, &st, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return PST_FORK_RUNNING;
	/* Exited (or reaped by someone else) without a result; the flag may have been set
	 * just before it exited. */
	if (atomic_load_explicit(&f->slot->done, memory_order_acquire) == SLOT_DONE) {
		*len = (size_t)f->slot->len;
		f->child_ns = f->slot->child_ns;
		f->pid = 0;
		return PST_FORK_DONE;
	}
	*status = r == f->pid ? st : -1;
	f->pid = 0;
	f->failures++;
	return PST_FORK_FAILED;
}
