// SPDX-License-Identifier: GPL-2.0
/*
 * Leapfrog window widening for stock kernels: the delay points of the
 * `--widen` patch series (deploy/kernel/widen/), at function granularity,
 * with kprobes and kretprobes instead of patched-in calls, and the same
 * run-time controls under /sys/kernel/leapfrog_widen/:
 *
 *   <point>/probability  parts per million, 0..1000000
 *   <point>/delay_ns     busy-wait, 0..1000000 (1 ms)
 *   <point>/uid          "any", or the fsuid (initial user namespace) of the
 *                        tasks the point delays
 *   <point>/hits         delays taken (read only)
 *   <point>/spent_ns     their length on the clock (read only)
 *   locked               1 when loaded with locked=1 (the VM's /init passes it
 *                        for leapfrog_widen=off on the kernel command line):
 *                        every point stays off, writes fail with -EPERM
 *   control              read: "<point> <probability> <delay_ns> <uid> <hits>"
 *                        per point; write: that line without hits, or "off"
 *
 * Bad values are refused with -EINVAL and a warning that says what was
 * wanted, as the built-in points do.
 *
 * The points (Debian 6.1: may_lookup, follow_dotdot_rcu and
 * __follow_mount_rcu are inlined, so their neighbours are probed). A point
 * has the built-in point's name where it fires at the same place:
 *
 *   lookup_found       return of __d_lookup_rcu() to lookup_fast() with a
 *                      dentry: found, parent's d_seq not yet rechecked
 *   step_into          return of step_into() with NULL: the step is taken
 *                      (symlinks followed too), before the next component
 *   may_lookup_before  entry of inode_permission(dir, MAY_EXEC[|MAY_NOT_BLOCK]),
 *                      the search check of may_lookup() (also lookup_one*())
 *   may_lookup_after   its return with 0: permission granted, not yet used
 *   mount_cross        return of __lookup_mnt() with a mount: found on the
 *                      dentry, before crossing (RCU and ref-walk)
 *   dotdot             entry of handle_dots() for "..": before it is resolved
 *                      (RCU and ref-walk; the built-in point is RCU only)
 *   setattr_copy       entry of in_group_or_capable() from setattr_copy():
 *                      owner and times updated, mode not yet (chmod only;
 *                      the built-in point fires for chown too)
 *   d_move             return of __d_rehash() to __d_move(): names and
 *                      parents switched, d_seq still held for writing
 *   mount_attach       entry of __attach_mnt(): mountpoint set, mount not
 *                      yet hashed, mount_lock held for writing
 *   exec_setid         entry of begin_new_exec(): exec's permission check
 *                      passed at open, the set-id bits not yet read
 *                      (bprm_fill_uid() is inlined into it)
 * and, with no built-in twin, named by function:
 *   kp_lookup_fast     entry of lookup_fast(): before the dcache hash lookup
 *   kp_try_to_unlazy   entry of try_to_unlazy(): RCU-walk about to take
 *                      references and revalidate what it read
 *   kp_choose_mountpoint_rcu  entry of choose_mountpoint_rcu(): ".." at a
 *                      mount's root, before the mountpoint is read (the
 *                      built-in dotdot_mountpoint sits after that read)
 *
 * Not offered (no call boundary at the place): acl_fetched (the fetch is
 * each file system's own ->get_acl()) and step_validated (inside
 * step_into()).
 *
 * A point whose function the kernel lacks (inlined, renamed) or cannot
 * probe is not offered: it has no folder and control refuses its name.
 * Every probe is registered disarmed and armed only while its point is set
 * (probability and delay non-zero), so a kernel with every point off runs
 * unprobed. An armed probe costs a breakpoint or ftrace trampoline on every
 * call of its function, from any task; only matching tasks are delayed.
 *
 * For test kernels only (Leapfrog's race finder).
 */
#define pr_fmt(fmt) "leapfrog_widen_kprobe: " fmt

#include <linux/cred.h>
#include <linux/timekeeping.h>
#include <linux/fs.h>
#include <linux/kallsyms.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/namei.h>
#include <linux/preempt.h>
#include <linux/random.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uidgid.h>
#include <linux/version.h>

#define LF_PPM 1000000U
#define LF_MAX_DELAY_NS 1000000U
#define LF_ANY_UID ((u32)-1)

static bool locked;
module_param(locked, bool, 0444);
MODULE_PARM_DESC(locked, "every point stays off and the controls refuse writes");

struct lf_point {
	const char *name;
	const char *symbol;   /* the probed function */
	const char *caller;   /* if set, fire only for calls from this function */
	bool on_return;       /* kretprobe: fire as the function returns */
	bool (*args_ok)(struct pt_regs *regs);   /* at entry, if set */
	bool (*result_ok)(struct pt_regs *regs); /* at return, if set */

	u32 probability;
	u32 delay_ns;
	u32 uid;
	atomic_long_t hits;
	atomic_long_t spent_ns;

	bool offered, armed;
	unsigned long caller_start, caller_end;
	struct kprobe kp;
	struct kretprobe rp;
	struct kobject *kobj;
};

static bool lf_returns_pointer(struct pt_regs *regs)
{
	return regs_return_value(regs) != 0;
}

static bool lf_returns_zero(struct pt_regs *regs)
{
	return regs_return_value(regs) == 0;
}

/* inode_permission(mnt_userns, inode, mask): the search check of a directory. */
static bool lf_dir_search(struct pt_regs *regs)
{
	const struct inode *inode = (const struct inode *)regs_get_kernel_argument(regs, 1);
	int mask = (int)regs_get_kernel_argument(regs, 2);

	return (mask & ~MAY_NOT_BLOCK) == MAY_EXEC && inode && S_ISDIR(READ_ONCE(inode->i_mode));
}

/*
 * handle_dots()'s type for "..": LAST_DOTDOT of namei.h's enum, which later
 * lines (6.12) keep private to fs/namei.c with the same order and value.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 12, 0)
#define LF_LAST_DOTDOT LAST_DOTDOT
#else
#define LF_LAST_DOTDOT 3
#endif

/* handle_dots(nd, type) */
static bool lf_dotdot(struct pt_regs *regs)
{
	return (int)regs_get_kernel_argument(regs, 1) == LF_LAST_DOTDOT;
}

static struct lf_point lf_points[] = {
	{ .name = "lookup_found", .symbol = "__d_lookup_rcu", .caller = "lookup_fast",
	  .on_return = true, .result_ok = lf_returns_pointer },
	{ .name = "step_into", .symbol = "step_into", .on_return = true,
	  .result_ok = lf_returns_zero },
	{ .name = "may_lookup_before", .symbol = "inode_permission", .args_ok = lf_dir_search },
	{ .name = "may_lookup_after", .symbol = "inode_permission", .on_return = true,
	  .args_ok = lf_dir_search, .result_ok = lf_returns_zero },
	{ .name = "mount_cross", .symbol = "__lookup_mnt", .on_return = true,
	  .result_ok = lf_returns_pointer },
	{ .name = "dotdot", .symbol = "handle_dots", .args_ok = lf_dotdot },
	{ .name = "setattr_copy", .symbol = "in_group_or_capable", .caller = "setattr_copy" },
	{ .name = "d_move", .symbol = "__d_rehash", .caller = "__d_move", .on_return = true },
	{ .name = "mount_attach", .symbol = "__attach_mnt" },
	{ .name = "kp_lookup_fast", .symbol = "lookup_fast" },
	{ .name = "exec_setid", .symbol = "begin_new_exec" },
	{ .name = "kp_try_to_unlazy", .symbol = "try_to_unlazy" },
	{ .name = "kp_choose_mountpoint_rcu", .symbol = "choose_mountpoint_rcu" },
};

#define LF_NR ARRAY_SIZE(lf_points)

/* Serialises writers and arming; the probes read each value once, unlocked. */
static DEFINE_MUTEX(lf_lock);

static int lf_check_unlocked(const char *what)
{
	if (!locked)
		return 0;
	pr_warn("%s: locked off (loaded with locked=1, for leapfrog_widen=off)\n", what);
	return -EPERM;
}

/* At entry: whether this call is one the point may delay. */
static bool lf_matches(struct lf_point *p, struct pt_regs *regs)
{
	u32 uid = READ_ONCE(p->uid);

	if (!READ_ONCE(p->probability) || !READ_ONCE(p->delay_ns) || !in_task())
		return false;
	if (uid != LF_ANY_UID && from_kuid(&init_user_ns, current_fsuid()) != (uid_t)uid)
		return false;
	if (p->caller) {
		/* At a function's entry the stack pointer points at its return address. */
		unsigned long ret = *(unsigned long *)kernel_stack_pointer(regs);

		if (ret < p->caller_start || ret >= p->caller_end)
			return false;
	}
	return !p->args_ok || p->args_ok(regs);
}

static void lf_delay(struct lf_point *p)
{
	u32 probability = READ_ONCE(p->probability);
	u32 delay = READ_ONCE(p->delay_ns);
	u64 start, now;

	if (!probability || !delay)
		return;
	if (probability < LF_PPM && get_random_u32_below(LF_PPM) >= probability)
		return;
	atomic_long_inc(&p->hits);
	/*
	 * Busy-wait (RCU-walk and spinlock holders may not sleep) on the
	 * clock, not with udelay(), whose per-CPU loops_per_jiffy a busy
	 * guest can calibrate several times too small.
	 */
	start = ktime_get_mono_fast_ns();
	do
		cpu_relax();
	while ((now = ktime_get_mono_fast_ns()) - start < delay);
	atomic_long_add(now - start, &p->spent_ns);
}

static int lf_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct lf_point *p = container_of(kp, struct lf_point, kp);

	if (lf_matches(p, regs))
		lf_delay(p);
	return 0;
}
NOKPROBE_SYMBOL(lf_pre);

/* Non-zero: no return instance, so the return handler does not run. */
static int lf_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct lf_point *p = container_of(get_kretprobe(ri), struct lf_point, rp);

	return !lf_matches(p, regs);
}
NOKPROBE_SYMBOL(lf_entry);

static int lf_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct lf_point *p = container_of(get_kretprobe(ri), struct lf_point, rp);

	if (!p->result_ok || p->result_ok(regs))
		lf_delay(p);
	return 0;
}
NOKPROBE_SYMBOL(lf_return);

/* [start, end) of function `symbol`, from a probe's address and its symbol's size. */
static int lf_function_range(const char *symbol, unsigned long *start, unsigned long *end)
{
	struct kprobe kp = { .symbol_name = symbol, .flags = KPROBE_FLAG_DISABLED };
	char buf[KSYM_SYMBOL_LEN], *plus;
	unsigned long addr, offset, size;
	int err = register_kprobe(&kp);

	if (err)
		return err;
	addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	sprint_symbol(buf, addr);
	plus = strrchr(buf, '+');
	if (!plus || sscanf(plus, "+%lx/%lx", &offset, &size) != 2)
		return -ENOENT;
	*start = addr - offset;
	*end = *start + size;
	return 0;
}

/* Registers p's probe disarmed; false (logged) when the kernel cannot offer it. */
static bool lf_register(struct lf_point *p)
{
	int err = 0;

	if (p->caller)
		err = lf_function_range(p->caller, &p->caller_start, &p->caller_end);
	if (err) {
		pr_warn("%s: not offered: caller %s: %d\n", p->name, p->caller, err);
		return false;
	}
	if (p->on_return) {
		p->rp.kp.symbol_name = p->symbol;
		p->rp.kp.flags = KPROBE_FLAG_DISABLED;
		p->rp.entry_handler = lf_entry;
		p->rp.handler = lf_return;
		p->rp.maxactive = 64;
		err = register_kretprobe(&p->rp);
	} else {
		p->kp.symbol_name = p->symbol;
		p->kp.flags = KPROBE_FLAG_DISABLED;
		p->kp.pre_handler = lf_pre;
		err = register_kprobe(&p->kp);
	}
	if (err)
		pr_warn("%s: not offered: cannot probe %s: %d\n", p->name, p->symbol, err);
	return !err;
}

static void lf_unregister(struct lf_point *p)
{
	if (p->on_return)
		unregister_kretprobe(&p->rp);
	else
		unregister_kprobe(&p->kp);
}

/* Called with lf_lock held after any change: arms exactly the points that are set. */
static int lf_update_probes(void)
{
	int i, err = 0;

	for (i = 0; i < LF_NR; i++) {
		struct lf_point *p = &lf_points[i];
		bool want = p->offered && p->probability && p->delay_ns;
		struct kprobe *kp = p->on_return ? &p->rp.kp : &p->kp;
		int e;

		if (want == p->armed)
			continue;
		e = want ? enable_kprobe(kp) : disable_kprobe(kp);
		if (e) {
			pr_warn("%s: cannot %s the probe on %s: %d\n", p->name,
				want ? "arm" : "disarm", p->symbol, e);
			err = err ?: e;
			continue;
		}
		p->armed = want;
	}
	return err;
}

enum lf_field { LF_PROBABILITY, LF_DELAY_NS, LF_UID };

static const char *const lf_field_names[] = { "probability", "delay_ns", "uid" };

/* Parses one value of `field` for `point`; -EINVAL with a warning if bad. */
static int lf_parse(const char *point, enum lf_field field, const char *text, u32 *out)
{
	unsigned int v;
	int err;

	if (field == LF_UID && sysfs_streq(text, "any")) {
		*out = LF_ANY_UID;
		return 0;
	}
	err = kstrtouint(text, 10, &v);
	if (!err && field == LF_PROBABILITY && v > LF_PPM)
		err = -ERANGE;
	if (!err && field == LF_DELAY_NS && v > LF_MAX_DELAY_NS)
		err = -ERANGE;
	if (!err && field == LF_UID && v == LF_ANY_UID)
		err = -ERANGE;
	if (err) {
		pr_warn("%s: bad %s \"%.*s\": want %s\n", point, lf_field_names[field],
			(int)strcspn(text, "\n"), text,
			field == LF_PROBABILITY ? "0..1000000 (parts per million)" :
			field == LF_DELAY_NS	? "0..1000000 (ns)" :
						  "\"any\" or a uid 0..4294967294");
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static u32 *lf_value(struct lf_point *p, enum lf_field field)
{
	switch (field) {
	case LF_PROBABILITY:
		return &p->probability;
	case LF_DELAY_NS:
		return &p->delay_ns;
	default:
		return &p->uid;
	}
}

static struct lf_point *lf_point_of(struct kobject *kobj)
{
	int i;

	for (i = 0; i < LF_NR; i++)
		if (lf_points[i].kobj == kobj)
			return &lf_points[i];
	return NULL;
}

static enum lf_field lf_field_of(struct kobj_attribute *attr)
{
	int f;

	for (f = LF_PROBABILITY; f < LF_UID; f++)
		if (!strcmp(attr->attr.name, lf_field_names[f]))
			return f;
	return LF_UID;
}

static int lf_emit_uid(char *buf, u32 uid)
{
	return uid == LF_ANY_UID ? sysfs_emit(buf, "any\n") : sysfs_emit(buf, "%u\n", uid);
}

static ssize_t lf_field_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	struct lf_point *p = lf_point_of(kobj);
	enum lf_field field = lf_field_of(attr);
	u32 v = READ_ONCE(*lf_value(p, field));

	return field == LF_UID ? lf_emit_uid(buf, v) : sysfs_emit(buf, "%u\n", v);
}

static ssize_t lf_field_store(struct kobject *kobj, struct kobj_attribute *attr,
			      const char *buf, size_t count)
{
	struct lf_point *p = lf_point_of(kobj);
	enum lf_field field = lf_field_of(attr);
	u32 v;
	int err = lf_check_unlocked(p->name);

	if (!err)
		err = lf_parse(p->name, field, buf, &v);
	if (err)
		return err;
	mutex_lock(&lf_lock);
	WRITE_ONCE(*lf_value(p, field), v);
	err = lf_update_probes();
	mutex_unlock(&lf_lock);
	return err ?: count;
}

static ssize_t hits_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&lf_point_of(kobj)->hits));
}

static ssize_t spent_ns_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&lf_point_of(kobj)->spent_ns));
}

static struct kobj_attribute lf_probability_attr =
	__ATTR(probability, 0644, lf_field_show, lf_field_store);
static struct kobj_attribute lf_delay_attr = __ATTR(delay_ns, 0644, lf_field_show, lf_field_store);
static struct kobj_attribute lf_uid_attr = __ATTR(uid, 0644, lf_field_show, lf_field_store);
static struct kobj_attribute lf_hits_attr = __ATTR_RO(hits);
static struct kobj_attribute lf_spent_ns_attr = __ATTR_RO(spent_ns);

static struct attribute *lf_point_attrs[] = {
	&lf_probability_attr.attr, &lf_delay_attr.attr, &lf_uid_attr.attr, &lf_hits_attr.attr,
	&lf_spent_ns_attr.attr, NULL,
};
static const struct attribute_group lf_point_group = { .attrs = lf_point_attrs };

static ssize_t control_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	int i, n = 0;

	for (i = 0; i < LF_NR; i++) {
		struct lf_point *p = &lf_points[i];
		u32 uid = READ_ONCE(p->uid);

		if (!p->offered)
			continue;
		n += sysfs_emit_at(buf, n, "%s %u %u ", p->name, READ_ONCE(p->probability),
				   READ_ONCE(p->delay_ns));
		n += uid == LF_ANY_UID ? sysfs_emit_at(buf, n, "any") :
					 sysfs_emit_at(buf, n, "%u", uid);
		n += sysfs_emit_at(buf, n, " %ld\n", atomic_long_read(&p->hits));
	}
	return n;
}

/* "<point> <probability> <delay_ns> <uid>" or "off". */
static ssize_t control_store(struct kobject *kobj, struct kobj_attribute *attr, const char *buf,
			     size_t count)
{
	char line[96], *rest = line, *name, *word;
	struct lf_point *p = NULL;
	u32 v[3];
	int i, err = lf_check_unlocked("control");

	if (err)
		return err;
	if (count >= sizeof(line)) {
		pr_warn("control: line too long (%zu bytes)\n", count);
		return -EINVAL;
	}
	memcpy(line, buf, count);
	line[count] = 0;
	if (sysfs_streq(line, "off")) {
		mutex_lock(&lf_lock);
		for (i = 0; i < LF_NR; i++) {
			WRITE_ONCE(lf_points[i].probability, 0);
			WRITE_ONCE(lf_points[i].delay_ns, 0);
			WRITE_ONCE(lf_points[i].uid, LF_ANY_UID);
			atomic_long_set(&lf_points[i].hits, 0);
			atomic_long_set(&lf_points[i].spent_ns, 0);
		}
		err = lf_update_probes();
		mutex_unlock(&lf_lock);
		return err ?: count;
	}
	name = strsep(&rest, " \t\n");
	for (i = 0; name && i < LF_NR; i++)
		if (lf_points[i].offered && !strcmp(name, lf_points[i].name))
			p = &lf_points[i];
	if (!p) {
		pr_warn("control: unknown point \"%s\": want \"off\" or \"<point> <probability> <delay_ns> <uid>\"\n",
			name ? name : "");
		return -EINVAL;
	}
	for (i = 0; i < 3; i++) {
		do
			word = strsep(&rest, " \t\n");
		while (word && !*word);
		if (!word) {
			pr_warn("control: %s: missing %s\n", p->name, lf_field_names[i]);
			return -EINVAL;
		}
		err = lf_parse(p->name, i, word, &v[i]);
		if (err)
			return err;
	}
	while (rest && *rest && strchr(" \t\n", *rest))
		rest++;
	if (rest && *rest) {
		pr_warn("control: %s: unexpected \"%.16s\" after the uid\n", p->name, rest);
		return -EINVAL;
	}
	mutex_lock(&lf_lock);
	WRITE_ONCE(p->probability, v[0]);
	WRITE_ONCE(p->delay_ns, v[1]);
	WRITE_ONCE(p->uid, v[2]);
	err = lf_update_probes();
	mutex_unlock(&lf_lock);
	return err ?: count;
}

static struct kobj_attribute lf_control_attr = __ATTR_RW(control);

static ssize_t locked_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", locked);
}
static struct kobj_attribute lf_locked_attr = __ATTR_RO(locked);

static struct kobject *lf_root;

static void lf_teardown(void)
{
	int i;

	for (i = 0; i < LF_NR; i++) {
		if (lf_points[i].kobj)
			kobject_put(lf_points[i].kobj);
		if (lf_points[i].offered)
			lf_unregister(&lf_points[i]);
	}
	kobject_put(lf_root);
}

static int __init lf_init(void)
{
	int i, offered = 0, err;

	for (i = 0; i < LF_NR; i++) {
		lf_points[i].uid = LF_ANY_UID;
		lf_points[i].offered = lf_register(&lf_points[i]);
		offered += lf_points[i].offered;
	}
	if (!offered) {
		pr_err("no delay point can be probed on this kernel\n");
		return -ENOENT;
	}
	/* Fails with -EEXIST on a kernel with the built-in points. */
	lf_root = kobject_create_and_add("leapfrog_widen", kernel_kobj);
	err = lf_root ? 0 : -ENOMEM;
	if (!err)
		err = sysfs_create_file(lf_root, &lf_control_attr.attr);
	if (!err)
		err = sysfs_create_file(lf_root, &lf_locked_attr.attr);
	for (i = 0; !err && i < LF_NR; i++) {
		if (!lf_points[i].offered)
			continue;
		lf_points[i].kobj = kobject_create_and_add(lf_points[i].name, lf_root);
		if (!lf_points[i].kobj)
			err = -ENOMEM;
		else
			err = sysfs_create_group(lf_points[i].kobj, &lf_point_group);
	}
	if (err) {
		pr_err("cannot create the sysfs controls (%d): does the kernel have the built-in points?\n",
		       err);
		lf_teardown();
		return err;
	}
	pr_info("%d of %zu delay points offered, all off%s\n", offered, LF_NR,
		locked ? ", locked" : "");
	return 0;
}

static void __exit lf_exit(void)
{
	lf_teardown();
}

module_init(lf_init);
module_exit(lf_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Leapfrog window widening: delay points on kprobes");
