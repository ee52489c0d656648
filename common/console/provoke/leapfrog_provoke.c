// SPDX-License-Identifier: GPL-2.0 OR MIT
// Test-only module that makes the kernel print a real report of one kind, so the
// console parser's golden files hold real console output (see
// ../capture_real_excerpts.sh). Load with `insmod leapfrog_provoke.ko what=KIND`;
// loading always fails afterwards so the module can be loaded again.
#include <linux/bug.h>
#include <linux/delay.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/string.h>

static char *what = "warn";
module_param(what, charp, 0444);
MODULE_PARM_DESC(what, "warn | oops | bug | spin | deadlock | list");

static noinline void leapfrog_provoke_warn(void)
{
	WARN_ON(1);
}

static noinline void leapfrog_provoke_oops(int *p)
{
	WRITE_ONCE(*p, 1);
}

static noinline void leapfrog_provoke_bug(void)
{
	BUG();
}

// Spins with preemption off: a soft lockup and an RCU stall once their
// thresholds pass.
static noinline void leapfrog_provoke_spin(unsigned int seconds)
{
	preempt_disable();
	mdelay(seconds * 1000);
	preempt_enable();
}

static DEFINE_MUTEX(leapfrog_provoke_lock);

// Takes a mutex it already holds: the task blocks in D state for good.
static noinline void leapfrog_provoke_deadlock(void)
{
	mutex_lock(&leapfrog_provoke_lock);
	mutex_lock(&leapfrog_provoke_lock);
}

// Deletes a list entry twice: CONFIG_DEBUG_LIST with BUG_ON_DATA_CORRUPTION
// turns the second deletion into a kernel BUG in lib/list_debug.c.
static noinline void leapfrog_provoke_list(void)
{
	static LIST_HEAD(head);
	static struct list_head entry;

	list_add(&entry, &head);
	list_del(&entry);
	list_del(&entry);
}

static int __init leapfrog_provoke_init(void)
{
	pr_info("leapfrog_provoke: %s\n", what);
	if (!strcmp(what, "warn"))
		leapfrog_provoke_warn();
	else if (!strcmp(what, "oops"))
		leapfrog_provoke_oops(NULL);
	else if (!strcmp(what, "bug"))
		leapfrog_provoke_bug();
	else if (!strcmp(what, "spin"))
		leapfrog_provoke_spin(15);
	else if (!strcmp(what, "deadlock"))
		leapfrog_provoke_deadlock();
	else if (!strcmp(what, "list"))
		leapfrog_provoke_list();
	return -EAGAIN;
}

module_init(leapfrog_provoke_init);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("Leapfrog: provoke kernel reports for console parser golden files");
