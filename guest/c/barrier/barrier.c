/*
 * barrier.c: the barrier family (world wazoo:recipes/barrier-recipe@0.1.2) in C, a port of
 * recipes/barrier (Rust) on the same wire, so C and Rust participants share one path.
 *
 * The barrier, ZooKeeper "Recipes and Solutions" 1.3: the barrier is up while its node exists
 * (kazoo's `Barrier`: a persistent node at the barrier path). The double barrier, 1.3.1, with
 * the seed's leave that wakes one process per departure.
 *
 * The double barrier is reused round after round, so rounds are told apart. The barrier node
 * PATH holds the number of the last round opened (none yet: empty). A participant joins the
 * next round: it reads that number N and, in one multi that checks the barrier node is still at
 * the version read, creates its ephemeral process node PATH/_c_<uuid>-r<N+1>-proc-<seq>. The
 * participant that finds `count` nodes of its round sets the barrier node to N+1 (at the version
 * read), which opens it for every node of that round. A participant leaves when no node of its
 * own round is left, as Curator's DistributedDoubleBarrier does. The barrier node is a container
 * where wazoo made it, removed by ZooKeeper once no process is left.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "wazoo_guest.h"

WAZOO_PROTOCOL("wazoo-barrier/1");

#define PROC "proc-"

/* The double barrier this handle entered (one instance serves one handle). */
static struct {
    bool entered;
    char *path;
    char *node; /* our process node */
    uint64_t round;
} entered;

/* Parses a whole decimal u64 ("+" allowed, as Rust's parse). */
static bool parse_u64(const char *s, size_t len, uint64_t *out) {
    size_t i = 0;
    if (len > 0 && s[0] == '+')
        i = 1;
    if (i == len)
        return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* The round a process node joined, from its name `…-r<round>-proc-<seq>`. */
static bool round_of(const char *name, uint64_t *round) {
    const char *mark = NULL;
    for (const char *p = strstr(name, "-" PROC); p; p = strstr(p + 1, "-" PROC))
        mark = p;
    if (!mark)
        return false;
    const char *dash = NULL;
    for (const char *p = name; p < mark; p++)
        if (*p == '-')
            dash = p;
    if (!dash || dash[1] != 'r')
        return false;
    return parse_u64(dash + 2, (size_t)(mark - dash - 2), round);
}

/* The last round opened, as the barrier node's data says (none yet: 0). */
static uint64_t opened(const uint8_t *data, size_t len) {
    uint64_t n;
    return parse_u64((const char *)data, len, &n) ? n : 0;
}

/* The process nodes of `round` under `path`, ordered by sequence (none once the barrier node is
 * gone). */
static int processes(const char *path, uint64_t round, wz_names *out) {
    int rc = wz_get_children(path, out);
    if (rc == WZ_NO_NODE)
        return WZ_OK;
    if (rc != WZ_OK)
        return rc;
    size_t kept = 0;
    for (size_t i = 0; i < out->count; i++) {
        uint64_t r;
        if (round_of(out->names[i], &r) && r == round)
            out->names[kept++] = out->names[i];
        else
            free(out->names[i]);
    }
    out->count = kept;
    wz_sort_by_marker(out, PROC);
    return WZ_OK;
}

/* Creates our process node in the next round to open: the round is read from the barrier node
 * and fixed by a multi that checks it has not changed. */
static int join_round(const char *path, char **node, uint64_t *round) {
    char *guid;
    wz_unique_id(&guid);
    char *prefix = wz_format("_c_%s-", guid);
    wz_free(guid);
    unsigned attempt = 0;
    int rc;
    for (;;) {
        uint8_t *data;
        size_t len;
        wz_stat stat;
        rc = wz_get_data(path, &data, &len, &stat);
        if (rc == WZ_NO_NODE) {
            char *first = wz_join(path, PROC);
            rc = wz_ensure_parents(first);
            wz_free(first);
            if (rc != WZ_OK)
                break;
            continue;
        }
        if (rc != WZ_OK)
            break;
        *round = opened(data, len) + 1;
        wz_free(data);
        char *name = wz_format("%sr%" PRIu64 "-" PROC, prefix, *round);
        char *create = wz_join(path, name);
        wz_free(name);
        wz_op ops[2] = {wz_op_check(path, stat.version), wz_op_create(create, NULL, 0, WZ_EPHEMERAL_SEQUENTIAL)};
        wz_op_result results[2];
        int failed;
        rc = wz_multi(ops, 2, results, &failed);
        wz_free(create);
        if (rc == WZ_OK) {
            if (results[1].kind == WZ_OP_CREATE) {
                *node = results[1].path;
                results[1].path = NULL;
            } else {
                rc = wz_fail(WZ_OTHER, "multi answered kind %d for a create", results[1].kind);
            }
            wz_op_results_free(results, 2);
            break;
        }
        /* A round opened (or the barrier node went) since we read it: read again. */
        if (failed == 0 && (rc == WZ_BAD_VERSION || rc == WZ_NO_NODE))
            continue;
        if (failed == -1 && rc == WZ_CONNECTION_LOSS && attempt < WZ_CONNECTION_LOSS_RETRIES) {
            attempt++;
            char *found;
            rc = wz_find_protected(path, prefix, true, &found);
            if (rc != WZ_OK)
                break;
            if (found) {
                uint64_t r;
                if (round_of(wz_node_name(found), &r))
                    *round = r;
                *node = found;
                break;
            }
            wz_backoff(attempt);
            continue;
        }
        break;
    }
    wz_free(prefix);
    return rc;
}

/* Waits until `round` is open, opening it when `count` of its processes are in.
 *
 * The processes are listed before the barrier node is read and watched: a participant that
 * joins after the list sees our node in its own list and opens the round, and the watch, armed
 * after the list, sees it open. So a participant that is waiting has already counted. */
static int wait_open(const char *path, uint64_t round, uint32_t count, wz_deadline deadline) {
    for (;;) {
        wz_names procs;
        int rc = processes(path, round, &procs);
        if (rc != WZ_OK)
            return rc;
        bool full = procs.count >= count;
        wz_names_free(&procs);
        uint8_t *data;
        size_t len;
        wz_stat stat;
        wz_watcher watcher;
        rc = wz_get_data_watch(path, &data, &len, &stat, &watcher);
        if (rc != WZ_OK)
            return rc;
        uint64_t now_open = opened(data, len);
        wz_free(data);
        if (now_open >= round) {
            wz_watcher_drop(&watcher);
            return WZ_OK;
        }
        if (full) {
            char *open = wz_format("%" PRIu64, round);
            WZ_RETRYING(rc, wz_set_data(path, open, strlen(open), stat.version, NULL));
            wz_free(open);
            wz_watcher_drop(&watcher);
            /* Opened by another, or our own write whose reply was lost: look again. */
            if (rc == WZ_BAD_VERSION)
                continue;
            return rc;
        }
        rc = wz_wait_on(watcher, deadline, NULL);
        wz_watcher_drop(&watcher);
        if (rc != WZ_OK)
            return rc;
    }
}

bool exports_wazoo_recipes_double_barrier_enter(recipe_string_t *path_arg, uint32_t count,
                                                uint64_t *maybe_timeout_ms,
                                                exports_wazoo_recipes_double_barrier_zk_error_t *err) {
    if (count == 0) {
        recipe_string_free(path_arg);
        return wz_to_zk_error(wz_fail(WZ_INVALID_ARGUMENT, "count must be at least 1"), err);
    }
    if (entered.entered) {
        recipe_string_free(path_arg);
        return wz_to_zk_error(wz_fail(WZ_INVALID_ARGUMENT, "this handle already entered %s", entered.path), err);
    }
    char *path;
    int rc = wz_take_path(path_arg, &path);
    if (rc != WZ_OK)
        return wz_to_zk_error(rc, err);
    wz_deadline deadline = wz_deadline_after(maybe_timeout_ms);
    char *node = NULL;
    uint64_t round = 0;
    rc = join_round(path, &node, &round);
    if (rc == WZ_OK) {
        rc = wait_open(path, round, count, deadline);
        if (rc == WZ_OK) {
            entered.entered = true;
            entered.path = path;
            entered.node = node;
            entered.round = round;
            return true;
        }
        /* Give up our node, keeping the failure (and its text) that made us. */
        char *why = wz_strdup(wz_message());
        wz_delete_retrying(node);
        wz_fail(rc, "%s", why);
        wz_free(why);
        wz_free(node);
    }
    wz_free(path);
    return wz_to_zk_error(rc, err);
}

/* Steps of leave, on the round this handle entered; `my_name` is our node's name. */
static int leave(const char *path, const char *node, uint64_t round, wz_deadline deadline) {
    const char *my_name = wz_node_name(node);
    for (;;) {
        /* 1. List the processes of our round; 2. none left: done. */
        wz_names procs;
        int rc = processes(path, round, &procs);
        if (rc != WZ_OK)
            return rc;
        if (procs.count == 0)
            return WZ_OK;
        bool here = wz_names_find(&procs, my_name) >= 0;
        /* 3. Only us left: delete our node and go. */
        if (here && procs.count == 1) {
            wz_names_free(&procs);
            return wz_delete_retrying(node);
        }
        /* 4. Lowest: wait for the highest to go; 5. otherwise delete ours and wait for the
         * lowest to go. */
        char *watch;
        if (here && strcmp(procs.names[0], my_name) == 0) {
            watch = wz_join(path, procs.names[procs.count - 1]);
        } else {
            watch = wz_join(path, procs.names[0]);
            if (here)
                rc = wz_delete_retrying(node);
        }
        wz_names_free(&procs);
        if (rc == WZ_OK) {
            int exists;
            wz_watcher watcher;
            rc = wz_exists_watch(watch, &exists, NULL, &watcher);
            if (rc == WZ_OK && exists)
                rc = wz_wait_on(watcher, deadline, NULL);
            wz_watcher_drop(&watcher);
        }
        wz_free(watch);
        if (rc != WZ_OK)
            return rc;
    }
}

bool exports_wazoo_recipes_double_barrier_leave(uint64_t *maybe_timeout_ms,
                                                exports_wazoo_recipes_double_barrier_zk_error_t *err) {
    if (!entered.entered)
        return wz_to_zk_error(wz_fail(WZ_INVALID_ARGUMENT, "leave: this handle has not entered"), err);
    wz_deadline deadline = wz_deadline_after(maybe_timeout_ms);
    int rc = leave(entered.path, entered.node, entered.round, deadline);
    /* Not out yet (a timeout, a lost connection): the handle is still in the barrier, and
     * leaving again goes on where this left off. */
    if (rc == WZ_OK) {
        wz_free(entered.path);
        wz_free(entered.node);
        entered.entered = false;
        entered.path = entered.node = NULL;
    }
    return wz_to_zk_error(rc, err);
}

bool exports_wazoo_recipes_barrier_set(recipe_string_t *path_arg, bool *ret,
                                       exports_wazoo_recipes_barrier_zk_error_t *err) {
    char *path;
    int rc = wz_take_path(path_arg, &path);
    if (rc == WZ_OK)
        rc = wz_ensure_parents(path);
    if (rc == WZ_OK) {
        /* A create that lost its reply and is retried finds the node: "already up" then means
         * "up", which is what the caller asked for. */
        WZ_RETRYING(rc, wz_create(path, NULL, 0, WZ_PERSISTENT, NULL));
        *ret = rc == WZ_OK;
        if (rc == WZ_NODE_EXISTS)
            rc = WZ_OK;
    }
    wz_free(path);
    return wz_to_zk_error(rc, err);
}

bool exports_wazoo_recipes_barrier_remove(recipe_string_t *path_arg, bool *ret,
                                          exports_wazoo_recipes_barrier_zk_error_t *err) {
    char *path;
    int rc = wz_take_path(path_arg, &path);
    if (rc == WZ_OK) {
        WZ_RETRYING(rc, wz_delete(path, WZ_ANY_VERSION));
        *ret = rc == WZ_OK;
        if (rc == WZ_NO_NODE)
            rc = WZ_OK;
    }
    wz_free(path);
    return wz_to_zk_error(rc, err);
}

bool exports_wazoo_recipes_barrier_wait(recipe_string_t *path_arg, uint64_t *maybe_timeout_ms,
                                        exports_wazoo_recipes_barrier_zk_error_t *err) {
    char *path;
    int rc = wz_take_path(path_arg, &path);
    if (rc == WZ_OK) {
        /* 1. exists with a watch; 2. absent: proceed; 3. otherwise wait for the watch and check
         * again (a delete followed by a new set keeps the barrier up). */
        rc = wz_exists_watch_wait(path, false, wz_deadline_after(maybe_timeout_ms));
    }
    wz_free(path);
    return wz_to_zk_error(rc, err);
}
