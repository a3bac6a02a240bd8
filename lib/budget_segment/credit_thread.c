/* SPDX-License-Identifier: MIT */
/*
 * credit_thread.c - each thread's credit record on a budget layer: where it
 * lives, how a thread gets one, and how its bytes come back.
 *
 * A record is one cache line (struct budget_credit) that only its thread
 * writes, so that credit.c's hot path is a plain load and a plain store.
 * The layer's pthread key maps a thread to its record; the key's destructor
 * gives a record's bytes back to the shared usage when its thread exits and
 * frees the line for the next thread.
 *
 * Records come in pages of BUDGET_CREDIT_LINES lines.  Each page is mapped
 * with a page of bookkeeping after it (which lines are taken, the layer,
 * the next page) and marked MADV_WIPEONFORK: a child of fork(2) reads
 * every line as zero.  Its parent's threads' credit is theirs, counted in
 * the parent's share; the child must neither hand it out nor give it back,
 * and the child's one thread starts from nothing.  The bookkeeping page is
 * inherited as it is, so the child walks the same list.
 *
 * Nothing here takes a lock: a line is claimed with a compare-and-swap on
 * its page's taken word and pages are only ever pushed on the list, until
 * fini unmaps them all.  So a child forked while another thread was in
 * here inherits nothing held.
 *
 * Teardown rule: fini deletes the key and then frees every page.  A thread
 * that exits after the key is deleted runs no destructor for it; one that
 * is inside the destructor while fini runs would touch unmapped memory.
 * The core's contract (no call into a layer while it is finalized) covers
 * a thread's exit as its last call: join the threads that allocated or
 * freed through a runtime, or let them live, across xdm_runtime_destroy.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

/* Lines are cache lines, and a page's taken word has a bit for each. */
#define BUDGET_CREDIT_LINES 64
static_assert(sizeof(struct budget_credit) == 64, "a record is one cache line");

/* The page after a page of lines: shared by everyone, kept across fork. */
struct budget_credit_book {
	struct budget_credit_book *next;	/* immutable once pushed */
	struct budget_account *b;
	_Atomic uint64_t taken;			/* bit i: line i has a thread */
};

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static struct budget_credit *lines_of(struct budget_credit_book *book)
{
	return (struct budget_credit *)((char *)book - page_size());
}

static struct budget_credit_book *book_of(struct budget_credit *line)
{
	uintptr_t page = (uintptr_t)line & ~(uintptr_t)(page_size() - 1);

	return (struct budget_credit_book *)(page + page_size());
}

/* A fresh page of free lines, not yet on the list; NULL with errno set. */
static struct budget_credit_book *page_new(struct budget_account *b)
{
	size_t page = page_size();
	char *map;
	struct budget_credit_book *book;

	static_assert(BUDGET_CREDIT_LINES * sizeof(struct budget_credit) <= 4096,
		      "the lines fit the smallest page");
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	if (madvise(map, page, MADV_WIPEONFORK) != 0) {
		int err = errno;

		munmap(map, 2 * page);
		errno = err;
		return NULL;
	}
	book = (struct budget_credit_book *)(map + page);
	book->b = b;
	return book;
}

static void page_push(struct budget_account *b, struct budget_credit_book *book)
{
	struct budget_credit_book *head = atomic_load_explicit(&b->credit_books,
							       memory_order_relaxed);

	do
		book->next = head;
	while (!atomic_compare_exchange_weak_explicit(&b->credit_books, &head, book,
						      memory_order_release, memory_order_relaxed));
}

static struct budget_credit_book *pages(struct budget_account *b)
{
	return atomic_load_explicit(&b->credit_books, memory_order_acquire);
}

/* Claim a free line of book; NULL when all are taken. */
static struct budget_credit *line_claim(struct budget_credit_book *book)
{
	uint64_t taken = atomic_load_explicit(&book->taken, memory_order_relaxed);

	while (~taken) {
		int i = __builtin_ctzll(~taken);

		if (atomic_compare_exchange_weak_explicit(&book->taken, &taken,
							  taken | (1ull << i),
							  memory_order_acquire,
							  memory_order_relaxed))
			return &lines_of(book)[i];
	}
	return NULL;
}

/* A line back to the free ones; it holds nothing. */
static void line_release(struct budget_credit *c)
{
	struct budget_credit_book *book = book_of(c);

	atomic_fetch_and_explicit(&book->taken, ~(1ull << (c - lines_of(book))),
				  memory_order_release);
}

/* The key's destructor: the thread exits, its credit goes back. */
static void credit_thread_exit(void *arg)
{
	struct budget_credit *c = arg;
	struct budget_credit_book *book = book_of(c);
	uint64_t have = atomic_load_explicit(&c->bytes, memory_order_relaxed);

	/* The line goes to the next thread that claims it: this one forgets it. */
	xdm_thread_last_forget(&budget_credit_last, c);
	/* A free line holds nothing and is asked nothing. */
	atomic_store_explicit(&c->bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&c->size, 0, memory_order_relaxed);
	atomic_store_explicit(&c->drain, 0, memory_order_relaxed);
	if (have)
		budget_release(&book->b->m, have);
	line_release(c);
}

struct budget_credit *budget_credit_claim(struct budget_account *b)
{
	struct budget_credit_book *book, *fresh;
	struct budget_credit *c = NULL;

	for (book = pages(b); book && !c; book = book->next)
		c = line_claim(book);
	if (!c) {
		/* Every line has a thread: a page more, its first line ours. */
		fresh = page_new(b);
		if (!fresh)
			return NULL;
		atomic_store_explicit(&fresh->taken, 1, memory_order_relaxed);
		page_push(b, fresh);
		c = lines_of(fresh);
	}
	/* A request raced with the line's last owner leaving: not ours. */
	atomic_store_explicit(&c->drain, 0, memory_order_relaxed);
	/* credit=SIZE has its size from the start, auto credit none yet. */
	atomic_store_explicit(&c->size, b->credit_auto ? 0 : b->credit_max, memory_order_relaxed);
	if (pthread_setspecific(b->credit_key, c) != 0) {
		line_release(c);
		return NULL;
	}
	xdm_thread_last_set(&budget_credit_last, b->serial, c);
	return c;
}

_Thread_local struct xdm_thread_last budget_credit_last;

struct budget_credit *budget_credit_find(struct budget_account *b)
{
	return xdm_thread_last_keep(&budget_credit_last, b->serial,
				    pthread_getspecific(b->credit_key));
}

enum xdm_status budget_credit_init(struct budget_account *b)
{
	struct budget_credit_book *book;
	int err;

	if (!b->credit_max)
		return XDM_OK;
	err = pthread_key_create(&b->credit_key, credit_thread_exit);
	if (err)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "budget: no pthread key left for the threads' credit (%s)",
				     strerror(err));
	/* The first page now, so that a kernel without MADV_WIPEONFORK
	 * (before Linux 4.14) is an error at init, not a surprise later. */
	book = page_new(b);
	if (!book) {
		err = errno;
		pthread_key_delete(b->credit_key);
		if (err == EINVAL && b->credit_auto) {
			/* auto is ours to choose: the strict mode, then. */
			b->credit_auto = false;
			b->credit_max = 0;
			return XDM_OK;
		}
		if (err == EINVAL)
			return xdm_error_set(XDM_E_NOT_SUPPORTED,
					     "budget: credit needs madvise(MADV_WIPEONFORK) "
					     "(Linux 4.14), so that a forked child never spends its "
					     "parent's credit; use credit=0 here");
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "budget: cannot map the threads' credit records (%s)",
				     strerror(err));
	}
	page_push(b, book);
	b->credit_key_made = true;
	return XDM_OK;
}

/*
 * After the last call into the layer.  No destructor starts once the key
 * is deleted, so every line still taken belongs to a thread that is alive
 * (or to nothing, in a forked child): its credit goes back here.
 */
void budget_credit_fini(struct budget_account *b)
{
	struct budget_credit_book *book, *next;
	uint64_t sum;

	if (!b->credit_key_made)
		return;
	pthread_key_delete(b->credit_key);
	b->credit_key_made = false;
	sum = budget_credit_held(b);
	if (sum)
		budget_release(&b->m, sum);
	for (book = pages(b); book; book = next) {
		next = book->next;
		munmap(lines_of(book), 2 * page_size());
	}
	atomic_store_explicit(&b->credit_books, NULL, memory_order_relaxed);
}

/* A sample while threads run; exact once they are quiet. */
uint64_t budget_credit_held(struct budget_account *b)
{
	uint64_t sum = 0;

	for (struct budget_credit_book *book = pages(b); book; book = book->next)
		for (int i = 0; i < BUDGET_CREDIT_LINES; i++)
			sum += atomic_load_explicit(&lines_of(book)[i].bytes,
						    memory_order_relaxed);
	return sum;
}

/*
 * Ask every other thread that holds credit to give it back.  Its owner
 * reads the request with a plain load on its next charge or uncharge
 * (credit.c); no thread can take another's credit without an atomic
 * read-modify-write on that thread's every call.
 */
void budget_credit_ask_back(struct budget_account *b, const struct budget_credit *mine)
{
	for (struct budget_credit_book *book = pages(b); book; book = book->next) {
		struct budget_credit *lines = lines_of(book);

		for (int i = 0; i < BUDGET_CREDIT_LINES; i++) {
			struct budget_credit *c = &lines[i];

			if (c == mine || !atomic_load_explicit(&c->bytes, memory_order_relaxed) ||
			    atomic_load_explicit(&c->drain, memory_order_relaxed))
				continue;
			atomic_store_explicit(&c->drain, 1, memory_order_relaxed);
		}
	}
}
