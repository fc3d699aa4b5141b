// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gdrkit_judges: plants one known bug when loaded, so that a test sees the
 * debug kernel's judge for it report it (gdrkit.vm.debugkernel).  A judge
 * that stays silent here would make every clean run of gdrdrv meaningless.
 * Test-only: never built into gdrdrv, never installed.
 */
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timer.h>

static char *plant = "none";
module_param(plant, charp, 0444);
MODULE_PARM_DESC(plant, "the bug to plant (none, or a name of judges_plants[])");

static DEFINE_MUTEX(judges_first);
static DEFINE_MUTEX(judges_second);
static DEFINE_SPINLOCK(judges_atomic);

/* KASAN: a read of a freed slab object. */
static noinline void plant_use_after_free(void)
{
	char *buffer = kmalloc(64, GFP_KERNEL);

	if (!buffer)
		return;
	kfree(buffer);
	OPTIMIZER_HIDE_VAR(buffer);
	pr_info("gdrkit_judges: read %d after free\n", READ_ONCE(buffer[8]));
}

/* lockdep: first->second, then second->first (one thread: no real deadlock). */
static noinline void plant_lock_inversion(void)
{
	mutex_lock(&judges_first);
	mutex_lock(&judges_second);
	mutex_unlock(&judges_second);
	mutex_unlock(&judges_first);

	mutex_lock(&judges_second);
	mutex_lock(&judges_first);
	mutex_unlock(&judges_first);
	mutex_unlock(&judges_second);
}

/* DEBUG_ATOMIC_SLEEP: a sleeping call's check under a spinlock (no real sleep). */
static noinline void plant_sleep_in_atomic(void)
{
	spin_lock(&judges_atomic);
	might_sleep();
	spin_unlock(&judges_atomic);
}

/* kmemleak: an allocation no pointer refers to once init returns. */
static noinline void plant_leak(void)
{
	void *lost = kmalloc(256, GFP_KERNEL);

	OPTIMIZER_HIDE_VAR(lost);
	if (lost)
		memset(lost, 0x5a, 256);
}

struct judges_holder {
	struct timer_list timer;
};

static void judges_timer_fn(struct timer_list *timer)
{
}

/* DEBUG_OBJECTS: freeing memory that holds an armed timer (its fixup deletes the timer). */
static noinline void plant_free_active_timer(void)
{
	struct judges_holder *holder = kzalloc(sizeof(*holder), GFP_KERNEL);

	if (!holder)
		return;
	timer_setup(&holder->timer, judges_timer_fn, 0);
	mod_timer(&holder->timer, jiffies + 60 * HZ);
	kfree(holder);
}

/* UBSAN: a shift past the width of int. */
static noinline void plant_shift_overflow(void)
{
	int shift = 40;
	int value;

	OPTIMIZER_HIDE_VAR(shift);
	value = 1 << shift;
	pr_info("gdrkit_judges: 1 << %d = %d\n", shift, value);
}

/* KCSAN: two threads writing one plain int for a while. */
static int judges_shared;

static int judges_racer(void *unused)
{
	while (!kthread_should_stop()) {
		judges_shared++;
		cond_resched();
	}
	return 0;
}

static noinline void plant_data_race(void)
{
	struct task_struct *racers[2];
	int i;

	for (i = 0; i < 2; i++)
		racers[i] = kthread_run(judges_racer, NULL, "gdrkit_racer/%d", i);
	msleep(3000);
	for (i = 0; i < 2; i++)
		if (!IS_ERR(racers[i]))
			kthread_stop(racers[i]);
}

static const struct {
	const char *name;
	void (*plant)(void);
} judges_plants[] = {
	{ "use_after_free", plant_use_after_free },
	{ "lock_inversion", plant_lock_inversion },
	{ "sleep_in_atomic", plant_sleep_in_atomic },
	{ "leak", plant_leak },
	{ "free_active_timer", plant_free_active_timer },
	{ "shift_overflow", plant_shift_overflow },
	{ "data_race", plant_data_race },
};

static int __init judges_init(void)
{
	size_t i;

	if (!strcmp(plant, "none"))
		return 0;
	for (i = 0; i < ARRAY_SIZE(judges_plants); i++) {
		if (!strcmp(plant, judges_plants[i].name)) {
			pr_info("gdrkit_judges: planting %s\n", plant);
			judges_plants[i].plant();
			return 0;
		}
	}
	pr_err("gdrkit_judges: unknown plant=%s\n", plant);
	return -EINVAL;
}

static void __exit judges_exit(void)
{
}

module_init(judges_init);
module_exit(judges_exit);
MODULE_DESCRIPTION("Plants known bugs for the debug kernels' judges (test-only)");
MODULE_LICENSE("Dual MIT/GPL");
