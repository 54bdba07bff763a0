/*
 * lock.c: the exclusive lock (world wazoo:recipes/lock-recipe@0.1.2) in C, a port of
 * recipes/lock (Rust) on the same wire, so C, Rust and Curator contenders exclude each other.
 *
 * ZooKeeper "Recipes and Solutions" 1.5.1 in Curator's InterProcessMutex format: ephemeral
 * sequential nodes `<path>/_c_<uuid>-lock-<seq>`, ordered by sequence; the lowest holds, every
 * other watches the node just before its own. The whole contention is the host's
 * (wz_contend, the host's contention.contend): the create and the first listing in one round
 * trip, and when the node waited for was the lowest and is deleted, the lock is held without
 * listing again. Re-entrant per handle, as Curator's mutex; revocation as Curator's
 * (`__REVOKE__` written into the holder's node, which is deleted after the grace period).
 */
#include <stdlib.h>
#include <string.h>

#include "wazoo_guest.h"

WAZOO_PROTOCOL("curator-mutex/1");

/* Curator's lock name: the sequence follows it. */
#define LOCK_NAME "lock-"

/* The lock node's data is left empty: the host writes the holder's identity there (wazoo lock
 * --id; through a daemon, with the client session's name and address), where Curator writes its
 * client's address and kazoo its identifier. */

/* Curator's revocation message. */
#define REVOKE "__REVOKE__"

/* What this handle holds (one instance serves one handle): the lock path, our node, its token,
 * and how many acquires it answered. */
static struct {
    unsigned count;
    char *path;
    char *node;
    int64_t token;
} held;

static const char *const ORDER[] = {LOCK_NAME};

/* Fills `ret` with what is held (the host frees it). */
static void answer(exports_wazoo_recipes_lock_held_t *ret) {
    recipe_string_dup(&ret->node, held.node);
    ret->token = held.token;
}

/* Steps 1 to 4 of the lock, or the count of a re-entrant acquire. */
static int acquire(char *path, wz_deadline deadline) {
    if (held.count > 0) {
        int rc = WZ_OK;
        if (strcmp(held.path, path) == 0)
            held.count++;
        else
            rc = wz_fail(WZ_INVALID_ARGUMENT, "this handle already holds \"%s\"", held.path);
        free(path);
        return rc;
    }
    /* 1. Create an ephemeral sequential node; 2. list the children without a watch; 3. if ours
     * is the lowest, the lock is ours; 4. otherwise watch only the node just before ours and go
     * back to 2. All of it the host's, in one call. */
    wz_rule rule = wz_rule_exclusive(ORDER, 1);
    char *node = NULL;
    int64_t token = 0;
    int rc = wz_contend(path, WZ_NAMED_PROTECTED, LOCK_NAME, "", 0, &rule,
                        deadline, &node, &token);
    if (rc != WZ_OK) {
        free(path);
        return rc;
    }
    held.count = 1;
    held.path = path;
    held.node = node;
    held.token = token;
    return WZ_OK;
}

bool exports_wazoo_recipes_lock_acquire(recipe_string_t *path_arg, uint64_t *maybe_timeout_ms,
                                        exports_wazoo_recipes_lock_held_t *ret,
                                        exports_wazoo_recipes_lock_zk_error_t *err) {
    char *path;
    int rc = wz_take_path(path_arg, &path);
    if (rc == WZ_OK)
        rc = acquire(path, wz_deadline_after(maybe_timeout_ms));
    if (rc == WZ_OK)
        answer(ret);
    return wz_to_zk_error(rc, err);
}

bool exports_wazoo_recipes_lock_try_acquire(recipe_string_t *path_arg,
                                            exports_wazoo_recipes_lock_option_held_t *ret,
                                            exports_wazoo_recipes_lock_zk_error_t *err) {
    char *path;
    int rc = wz_take_path(path_arg, &path);
    uint64_t none = 0;
    if (rc == WZ_OK)
        rc = acquire(path, wz_deadline_after(&none));
    ret->is_some = rc == WZ_OK;
    if (rc == WZ_OK)
        answer(&ret->val);
    /* Taken by another: none, not a failure. */
    if (rc == WZ_TIMEOUT)
        rc = WZ_OK;
    return wz_to_zk_error(rc, err);
}

bool exports_wazoo_recipes_lock_release(exports_wazoo_recipes_lock_zk_error_t *err) {
    if (held.count == 0)
        return wz_to_zk_error(wz_fail(WZ_INVALID_ARGUMENT, "release: nothing is held"), err);
    if (--held.count > 0)
        return true;
    /* The last release deletes the node, waking the one waiter behind it. Unwaited (the host's
     * delete-unwaited): the delete is sent now and this session's next request (this handle's
     * next acquire) is applied after it; the host settles a lost reply. A node already gone (or
     * gone with an expired session) counts as released. */
    int rc = wz_release_node(held.node);
    wz_free(held.path);
    wz_free(held.node);
    held.path = held.node = NULL;
    return wz_to_zk_error(rc, err);
}

/* What precedes the 10-digit sequence of a claim node revocation applies to: Curator's lock,
 * read/write lock and semaphore lease names. */
static const char *const CLAIM_MARKERS[] = {"-lock-", "__READ__", "__WRIT__", "-lease-"};
#define CLAIM_NAMES "…-lock-, …__READ__, …__WRIT__ or …-lease-"

/* Whether `name` is a claim node's name in the formats revocation applies to: a lock's, either
 * side of a read/write lock's, or a semaphore lease's, each ending in its 10-digit sequence. No
 * other node (a configuration value, a queue item) is ever written __REVOKE__ or deleted. */
static bool is_claim_node(const char *name) {
    size_t len = strlen(name);
    if (len < 10)
        return false;
    for (size_t i = len - 10; i < len; i++)
        if (name[i] < '0' || name[i] > '9')
            return false;
    size_t stem = len - 10;
    for (size_t m = 0; m < sizeof CLAIM_MARKERS / sizeof *CLAIM_MARKERS; m++) {
        size_t mlen = strlen(CLAIM_MARKERS[m]);
        if (stem >= mlen && strncmp(name + stem - mlen, CLAIM_MARKERS[m], mlen) == 0)
            return true;
    }
    return false;
}

/* The revoker's side: asks the holder of `node` to let go, and with a grace period deletes the
 * node once it has passed. *released is false only when the node had to be deleted. */
static int revoke(const char *node, const uint64_t *maybe_grace_ms, bool *released) {
    *released = true;
    if (!is_claim_node(wz_node_name(node)))
        return wz_fail(WZ_INVALID_ARGUMENT,
                       "%s is not a lock, read/write lock or lease node (" CLAIM_NAMES
                       " and a 10-digit sequence)",
                       node);
    int rc;
    WZ_RETRYING(rc, wz_set_data(node, REVOKE, strlen(REVOKE), WZ_ANY_VERSION, NULL));
    if (rc == WZ_NO_NODE || (rc == WZ_OK && !maybe_grace_ms))
        return WZ_OK;
    if (rc != WZ_OK)
        return rc;
    wz_deadline deadline = wz_deadline_after(maybe_grace_ms);
    for (;;) {
        int exists;
        wz_watcher watcher;
        rc = wz_exists_watch(node, &exists, NULL, &watcher);
        if (rc != WZ_OK)
            return rc;
        if (!exists) {
            wz_watcher_drop(&watcher);
            return WZ_OK;
        }
        rc = wz_wait_on(watcher, deadline, NULL);
        wz_watcher_drop(&watcher);
        if (rc == WZ_OK)
            continue;
        if (rc != WZ_TIMEOUT)
            return rc; /* An expired session deleted nothing: that is an error, not "forced". */
        /* The grace period is over: take the lock away. */
        WZ_RETRYING(rc, wz_delete(node, WZ_ANY_VERSION));
        if (rc == WZ_OK || rc == WZ_NO_NODE) {
            *released = false;
            return WZ_OK;
        }
        return rc;
    }
}

bool exports_wazoo_recipes_lock_revoke(recipe_string_t *node_arg, uint64_t *maybe_grace_ms, bool *ret,
                                       exports_wazoo_recipes_lock_zk_error_t *err) {
    char *node;
    int rc = wz_take_path(node_arg, &node);
    if (rc == WZ_OK) {
        rc = revoke(node, maybe_grace_ms, ret);
        wz_free(node);
    }
    return wz_to_zk_error(rc, err);
}
