/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pst_fork: a forked child serialises a copy-on-write image of a service's state into shared
 * memory; the parent goes on at once.
 *
 * The toy service is a few MiB of pst_mem_private memory holding a pattern of one
 * generation; its serialiser copies it into the shared buffer. A gate in shared memory holds
 * the child before it reads the state, so the parent can rewrite the whole state first: the
 * image must still be the one at fork time. The same run on shared memory shows the new
 * generation (the control: the test can tell a copy-on-write image from a live one).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "helpers.h"

#define STATE_SIZE (UINT32_C(6) << 20) /* three 2 MiB huge pages at least, and a ragged end */
#define STATE_TAIL 123u                /* bytes past STATE_SIZE: not a page multiple */
#define WAIT_NS UINT64_C(10000000000)  /* bound of every wait for a child (a loaded host) */
#define POLL_SLEEP_NS 1000000          /* between two polls */
#define FOREVER_NS UINT64_C(60000000000) /* the "long" child's bound (it is killed long before) */
#define SLOW_EXIT_SIZE (UINT64_C(256) << 20) /* unmapping 64k pages takes the exit ~10 ms */
#define SLOW_EXIT_TRIES 8              /* runs to catch the child between result and exit */

enum toy_mode {
	TOY_COPY,    /* wait for the gate, copy the state; 0 when it does not fit */
	TOY_KILLED,  /* raise(SIGKILL) before writing anything */
	TOY_ABORT,   /* abort(), as a failed CHECK in the serialiser would */
	TOY_FOREVER, /* sleep until killed */
	TOY_SLOW_EXIT, /* copy, then populate SLOW_EXIT_SIZE: the child's exit takes a while */
};

/* The service the child serialises. The struct itself is private memory (the test's). */
struct toy {
	uint8_t *state;        /* size bytes */
	size_t size;           /* STATE_SIZE + STATE_TAIL */
	enum toy_mode mode;    /* what the serialiser does */
	_Atomic uint32_t *gate; /* shared: nonzero lets the child read the state */
};

static struct toy toy;
static struct pst_fork fk;
static uint8_t *buf;      /* shared: the image */
static size_t buf_cap;
static _Atomic uint32_t *gate;

static void
sleep_ns(long ns)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = ns };
	nanosleep(&ts, NULL);
}

/* Generation gen's byte at off: every byte differs from the next generation's, and a shifted
 * or partial copy shows. */
static uint8_t
pattern(size_t off, uint32_t gen)
{
	uint64_t x = (uint64_t)off * UINT64_C(0x9e3779b97f4a7c15) + gen;
	return (uint8_t)((x >> 29) ^ (x >> 7) ^ gen);
}

static void
state_fill(uint8_t *state, size_t size, uint32_t gen)
{
	for (size_t i = 0; i < size; i++)
		state[i] = pattern(i, gen);
}

/* The first byte that is not generation gen's, or size. */
static size_t
state_diff(const uint8_t *state, size_t size, uint32_t gen)
{
	for (size_t i = 0; i < size; i++)
		if (state[i] != pattern(i, gen))
			return i;
	return size;
}

/* Runs in the child: no Criterion, no allocation. */
static size_t
toy_serialize(const void *svc, void *out, size_t cap)
{
	const struct toy *t = svc;
	switch (t->mode) {
	case TOY_KILLED:
		raise(SIGKILL);
		break;
	case TOY_ABORT:
		abort();
	case TOY_FOREVER:
		for (uint64_t slept = 0; slept < FOREVER_NS; slept += POLL_SLEEP_NS)
			sleep_ns(POLL_SLEEP_NS);
		return 0;
	case TOY_SLOW_EXIT:
		/* Left mapped: the kernel unmaps it in the child's exit, after the result. */
		(void)mmap(NULL, SLOW_EXIT_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		break;
	case TOY_COPY:
		break;
	}
	for (uint64_t waited = 0; atomic_load(t->gate) == 0 && waited < WAIT_NS;
	     waited += POLL_SLEEP_NS / 10)
		sleep_ns(POLL_SLEEP_NS / 10);
	if (cap < t->size)
		return 0;
	memcpy(out, t->state, t->size);
	return t->size;
}

/* Poll as the shard does, with a bound; the first state other than RUNNING. */
static enum pst_fork_state
poll_until_settled(size_t *len, int *status)
{
	uint64_t end = test_now_ns() + WAIT_NS;
	for (;;) {
		enum pst_fork_state s = pst_fork_poll(&fk, len, status);
		if (s != PST_FORK_RUNNING)
			return s;
		cr_assert(lt(u64, test_now_ns(), end), "the child still runs after the bound");
		sleep_ns(POLL_SLEEP_NS);
	}
}

/* After a result: later polls reap the child (its teardown may take a moment). */
static void
poll_until_reaped(void)
{
	uint64_t end = test_now_ns() + WAIT_NS;
	size_t len = 0;
	int status = 0;
	while (fk.pid != 0) {
		cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));
		cr_assert(lt(u64, test_now_ns(), end), "the child was never reaped");
		sleep_ns(POLL_SLEEP_NS);
	}
}

/* True once pid is gone: no process, not even a zombie (kill(0) succeeds on one). */
static bool
process_gone(pid_t pid)
{
	return kill(pid, 0) == -1 && errno == ESRCH;
}

static void
setup(void)
{
	cr_assert(eq(int, pst_fork_init(&fk), 0));
	cr_assert(eq(int, fk.pid, 0));
	toy.size = STATE_SIZE + STATE_TAIL;
	toy.state = pst_mem_private(toy.size);
	cr_assert(not(eq(ptr, toy.state, NULL)));
	toy.mode = TOY_COPY;
	gate = pst_mem_shared(sizeof(*gate));
	cr_assert(not(eq(ptr, (void *)gate, NULL)));
	toy.gate = gate;
	buf_cap = toy.size;
	buf = pst_mem_shared(buf_cap);
	cr_assert(not(eq(ptr, buf, NULL)));
	state_fill(toy.state, toy.size, 1);
}

static void
teardown(void)
{
	pst_fork_fini(&fk);
	pst_mem_free(buf, buf_cap);
	pst_mem_free((void *)gate, sizeof(*gate));
	pst_mem_free(toy.state, toy.size);
}

TestSuite(pst_fork, .init = setup, .fini = teardown, .timeout = 60);

/* Goal: the helpers give zeroed memory of the size asked (not a page multiple), writable.
 * Method: check every byte of fresh private and shared regions, write them, free them. */
Test(pst_fork, mem_zeroed_and_writable)
{
	size_t size = (UINT32_C(3) << 20) + 77;
	uint8_t *p = pst_mem_private(size);
	uint8_t *s = pst_mem_shared(size);
	cr_assert(not(eq(ptr, p, NULL)));
	cr_assert(not(eq(ptr, s, NULL)));
	size_t first_p = size, first_s = size;
	for (size_t i = size; i-- > 0;) {
		if (p[i] != 0)
			first_p = i;
		if (s[i] != 0)
			first_s = i;
	}
	cr_assert(eq(sz, first_p, size), "private byte %zu is not zero", first_p);
	cr_assert(eq(sz, first_s, size), "shared byte %zu is not zero", first_s);
	memset(p, 0xa5, size);
	memset(s, 0x5a, size);
	cr_assert(eq(u8, p[size - 1], 0xa5));
	cr_assert(eq(u8, s[size - 1], 0x5a));
	pst_mem_free(p, size);
	pst_mem_free(s, size);
	pst_mem_free(NULL, size); /* a no-op, as free(NULL) */
}

/* Goal: the image is the state at fork time, however the parent changes it afterwards.
 * Method: the gate holds the child before it reads; the parent rewrites every byte with the
 * next generation and then opens the gate; the image must be generation 1 whole, the
 * parent's state generation 2. */
Test(pst_fork, image_is_the_state_at_fork)
{
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	cr_assert(gt(int, fk.pid, 0));
	state_fill(toy.state, toy.size, 2);
	atomic_store(gate, 1);
	size_t len = 0;
	int status = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, toy.size));
	cr_assert(eq(sz, state_diff(buf, len, 1), len), "the image differs from the state at fork");
	cr_assert(eq(sz, state_diff(toy.state, toy.size, 2), toy.size));
	cr_assert(eq(u64, fk.forks, 1));
	cr_assert(eq(u64, fk.failures, 0));
	cr_assert(gt(u64, fk.fork_ns, 0));
	cr_assert(eq(u64, fk.fork_ns_max, fk.fork_ns));
	cr_assert(gt(u64, fk.child_ns, 0));
	cr_assert(gt(u64, fk.started_ns, 0));
	poll_until_reaped();
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));
}

/* Goal (the control of the test above): state in shared memory is no snapshot, as
 * persist.h warns for DPDK's hugetlbfs memory.
 * Method: the same run with the state in pst_mem_shared: the child reads the parent's
 * rewrite. Were the test above passing here too, it would prove nothing. */
Test(pst_fork, shared_state_is_no_snapshot)
{
	uint8_t *shared = pst_mem_shared(toy.size);
	cr_assert(not(eq(ptr, shared, NULL)));
	state_fill(shared, toy.size, 1);
	struct toy live = toy;
	live.state = shared;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &live, buf, buf_cap, NULL, 0, 0), 0));
	state_fill(shared, toy.size, 2);
	atomic_store(gate, 1);
	size_t len = 0;
	int status = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, toy.size));
	cr_assert(eq(sz, state_diff(buf, len, 2), len));
	poll_until_reaped();
	pst_mem_free(shared, toy.size);
}

/* Goal: one child at a time: -EBUSY while it runs, and while it has exited but is not
 * reaped; the next start works once a poll has collected and reaped it.
 * Method: the gate holds the child (RUNNING, -EBUSY); opened, wait for the child's exit
 * without reaping it (waitid WNOWAIT): still -EBUSY; poll: DONE and reaped; start again. */
Test(pst_fork, busy_until_reaped)
{
	size_t len = 0;
	int status = 0;
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	pid_t first = fk.pid;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0),
		     -EBUSY));
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_RUNNING));
	cr_assert(eq(int, fk.pid, first));
	cr_assert(eq(u64, fk.forks, 1));

	atomic_store(gate, 1);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	cr_assert(eq(int, waitid(P_PID, (id_t)first, &si, WEXITED | WNOWAIT), 0));
	cr_assert(eq(int, si.si_code, CLD_EXITED));
	cr_assert(eq(int, si.si_status, 0));
	cr_assert(not(process_gone(first)), "the zombie should still be there");
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0),
		     -EBUSY));

	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, toy.size));
	poll_until_reaped();
	cr_assert(process_gone(first));
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));

	state_fill(toy.state, toy.size, 3);
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	cr_assert(not(eq(int, fk.pid, first)));
	len = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, state_diff(buf, len, 3), toy.size));
	cr_assert(eq(u64, fk.forks, 2));
	cr_assert(eq(u64, fk.failures, 0));
	cr_assert(ge(u64, fk.fork_ns_max, fk.fork_ns));
	poll_until_reaped();
}

/* Goal: still one child at a time once its result is collected, until it is reaped (a big
 * image takes the child a while to tear down; the poll that collects never waits for it).
 * Method: a child whose exit unmaps 256 MiB; poll every millisecond until DONE; while the
 * child is collected but not reaped, start is -EBUSY and polls are IDLE, then it is reaped
 * and the next start works. The window is timing: a few tries, one must land in it. */
Test(pst_fork, busy_until_reaped_after_result)
{
	toy.mode = TOY_SLOW_EXIT;
	atomic_store(gate, 1);
	uint32_t caught = 0;
	for (uint32_t try = 0; try < SLOW_EXIT_TRIES && caught == 0; try++) {
		cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0),
			     0));
		pid_t pid = fk.pid;
		size_t len = 0;
		int status = 0;
		cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
		cr_assert(eq(sz, len, toy.size));
		if (fk.pid != 0) {
			caught++;
			cr_assert(eq(int, fk.pid, pid));
			cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL,
							 0, 0),
				     -EBUSY));
			cr_assert(eq(int, fk.pid, pid));
		}
		poll_until_reaped();
		cr_assert(process_gone(pid));
	}
	cr_assert(eq(u32, caught, 1), "no poll saw the child between its result and its exit");
	cr_assert(eq(u64, fk.failures, 0));
}

/* Goal: a state too big for the buffer is a result, not a failure: DONE with length 0.
 * Method: a cap one byte short; the serialiser returns 0; nothing is written. */
Test(pst_fork, too_small_is_done_with_len_zero)
{
	atomic_store(gate, 1);
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, toy.size - 1, NULL, 0, 0),
		     0));
	size_t len = 99;
	int status = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, 0));
	cr_assert(eq(u8, buf[0], 0));
	cr_assert(eq(u64, fk.failures, 0));
	poll_until_reaped();
}

/* Goal: a child killed before its result is FAILED, counted, reaped, and the next start
 * works. Method: the serialiser raises SIGKILL; the status says so. */
Test(pst_fork, killed_child_is_failed)
{
	toy.mode = TOY_KILLED;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	pid_t pid = fk.pid;
	size_t len = 99;
	int status = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_FAILED));
	bool signaled = WIFSIGNALED(status); /* a local: the macro confuses cr_assert */
	cr_assert(signaled, "status %#x", (unsigned)status);
	cr_assert(eq(int, WTERMSIG(status), SIGKILL));
	cr_assert(eq(sz, len, 99), "no length from a failed child");
	cr_assert(eq(u64, fk.failures, 1));
	cr_assert(eq(int, fk.pid, 0));
	cr_assert(process_gone(pid));
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));

	toy.mode = TOY_COPY;
	atomic_store(gate, 1);
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, toy.size));
	cr_assert(eq(u64, fk.forks, 2));
	cr_assert(eq(u64, fk.failures, 1));
	poll_until_reaped();
}

/* Goal: a serialiser that aborts (a failed CHECK) is FAILED too.
 * Method: abort() in the child, no core file (the limit is inherited). */
Test(pst_fork, aborting_child_is_failed)
{
	struct rlimit no_core = { 0, 0 };
	cr_assert(eq(int, setrlimit(RLIMIT_CORE, &no_core), 0));
	toy.mode = TOY_ABORT;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	size_t len = 0;
	int status = 0;
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_FAILED));
	bool signaled = WIFSIGNALED(status); /* a local: the macro confuses cr_assert */
	cr_assert(signaled, "status %#x", (unsigned)status);
	cr_assert(eq(int, WTERMSIG(status), SIGABRT));
	cr_assert(eq(u64, fk.failures, 1));
	cr_assert(eq(int, fk.pid, 0));
}

/* Goal: pst_fork_kill ends a child that would run on, reaps it, and drops its result.
 * Method: a serialiser that sleeps for a minute; kill returns long before, with pid 0 and
 * the process gone; polls are IDLE; the next start works. */
Test(pst_fork, kill_ends_a_long_child)
{
	toy.mode = TOY_FOREVER;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	pid_t pid = fk.pid;
	size_t len = 0;
	int status = 0;
	sleep_ns(20 * POLL_SLEEP_NS); /* past the first waitpid (10 ms): it runs */
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_RUNNING));
	uint64_t t0 = test_now_ns();
	pst_fork_kill(&fk);
	cr_assert(lt(u64, test_now_ns() - t0, WAIT_NS));
	cr_assert(eq(int, fk.pid, 0));
	cr_assert(process_gone(pid));
	cr_assert(eq(int, pst_fork_poll(&fk, &len, &status), PST_FORK_IDLE));
	pst_fork_kill(&fk); /* nothing to kill: a no-op */
	cr_assert(eq(int, fk.pid, 0));

	toy.mode = TOY_COPY;
	atomic_store(gate, 1);
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	cr_assert(eq(int, poll_until_settled(&len, &status), PST_FORK_DONE));
	cr_assert(eq(sz, len, toy.size));
	poll_until_reaped();
}

/* Goal: fini leaves no child behind and unmaps the slot.
 * Method: fini with a long child running; the process is gone, the slot NULL; init again
 * works (teardown's fini then has nothing to do). */
Test(pst_fork, fini_kills_the_child)
{
	toy.mode = TOY_FOREVER;
	cr_assert(eq(int, pst_fork_start(&fk, toy_serialize, &toy, buf, buf_cap, NULL, 0, 0), 0));
	pid_t pid = fk.pid;
	pst_fork_fini(&fk);
	cr_assert(eq(ptr, fk.slot, NULL));
	cr_assert(eq(int, fk.pid, 0));
	cr_assert(process_gone(pid));
	cr_assert(eq(int, pst_fork_init(&fk), 0));
}
