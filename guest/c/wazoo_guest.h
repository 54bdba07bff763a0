/*
 * wazoo_guest.h: the guest side of wazoo for C recipes.
 *
 * The C counterpart of guest/rust (Rust), guest/python/wazoo_guest and
 * guest/js/wazoo-guest.js: the wazoo:zk primitives over plain C strings with error codes,
 * plus the steps every ZooKeeper recipe needs and that are easy to get subtly wrong: ordering
 * sequential children the way Curator does, contending for a turn, deadlines, and writing
 * through connection loss. The subtlest steps are the host's, once for every language (the
 * protected create, the contention with its hand-over, wait-for-change, wait-any, retried
 * reads): the functions naming them are thin.
 *
 * It includes "recipe.h", the bindings `wazoo new bindings --world WORLD` writes, and works
 * with the bindings of any recipe world.
 *
 * Errors. Every function returning `int` returns 0 on success, otherwise a WZ_* code: the
 * zk-error case's WIT tag + 1. The text of the cases that carry one (invalid-path,
 * invalid-argument, limit-exceeded, other) is kept until the next failure: wz_message(). A
 * call that returns 0 leaves it as it was. At an export, wz_to_zk_error() turns a code back
 * into the zk-error the caller sees.
 *
 * Memory. Strings passed in are NUL-terminated and borrowed. Everything returned through a
 * `char **`, `uint8_t **` or wz_names is allocated with malloc and belongs to the caller:
 * release it with wz_free() (wz_names_free() for a wz_names). An out-parameter that may be
 * NULL says "nullable".
 *
 * A component instance serves one recipe handle and runs one call at a time, so state kept in
 * statics (the layer's, and a recipe's own) belongs to that handle.
 */
#ifndef WAZOO_GUEST_H
#define WAZOO_GUEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------------------------ */

/* Return codes: 0 is success, every other is a zk-error case (its WIT tag + 1). */
enum {
    WZ_OK = 0,
    WZ_NO_NODE = 1,
    WZ_NODE_EXISTS = 2,
    WZ_NOT_EMPTY = 3,
    WZ_BAD_VERSION = 4,
    WZ_NO_CHILDREN_FOR_EPHEMERALS = 5,
    WZ_CONNECTION_LOSS = 6,
    WZ_SESSION_EXPIRED = 7,
    WZ_NO_AUTH = 8,
    WZ_INVALID_PATH = 9,     /* carries a message */
    WZ_INVALID_ARGUMENT = 10, /* carries a message */
    WZ_TIMEOUT = 11,
    WZ_QUOTA_EXCEEDED = 12,
    WZ_LIMIT_EXCEEDED = 13,  /* carries a message */
    WZ_UNIMPLEMENTED = 14,
    WZ_OTHER = 15,           /* carries a message */
};

/* The message of the last failure ("" for a case without one). Valid until the next failure. */
const char *wz_message(void);

/* The WIT name of `code` ("no-node", "timeout", …); "ok" for 0, "unknown" for anything else. */
const char *wz_error_name(int code);

/* Records a failure of the recipe's own (e.g. WZ_INVALID_ARGUMENT) with a printf-style message;
 * returns `code`. */
int wz_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At an export's boundary: true when `code` is 0 (err untouched); otherwise fills `err` with the
 * zk-error for `code` (for the cases that carry text: wz_message() if the last failure had this
 * code, else the code's name; the host frees it) and returns false. So
 * `return wz_to_zk_error(rc, err);` ends an export. */
bool wz_to_zk_error(int code, wazoo_zk_types_zk_error_t *err);

/* ---- Memory and strings ------------------------------------------------------------------ */

/* Releases a string or buffer this layer returned (free). */
void wz_free(void *p);

/* Child names, as wz_get_children returns them. */
typedef struct wz_names {
    char **names;
    size_t count;
} wz_names;

/* Releases every name and the array; leaves `names` empty. */
void wz_names_free(wz_names *names);

/* The index of `name` in `names`, or -1. */
ptrdiff_t wz_names_find(const wz_names *names, const char *name);

/* A malloc'd copy of `s`. */
char *wz_strdup(const char *s);

/* A malloc'd string printed from `fmt` (printf). */
char *wz_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Takes an export's string argument (which the export owns): *out becomes a malloc'd C string
 * and `s` is released. A string holding a NUL byte cannot be one: WZ_INVALID_ARGUMENT. */
int wz_take_string(recipe_string_t *s, char **out);

/* wz_take_string for a path argument, checked first by the host's rules (WZ_INVALID_PATH says
 * why, also for a NUL byte). `s` is released in every case. */
int wz_take_path(recipe_string_t *s, char **out);

/* Takes an export's list<string> argument: every string into `out` (wz_names_free), the list
 * released. WZ_INVALID_ARGUMENT if one holds a NUL byte (then nothing is kept). */
int wz_take_strings(recipe_list_string_t *list, wz_names *out);

/* `len` bytes of `data` as UTF-8 text (malloc'd, NUL-terminated; *out_len, nullable, is its
 * length), each invalid sequence replaced by U+FFFD as Rust's from_utf8_lossy does: what a
 * WIT string must hold. */
char *wz_utf8_lossy(const void *data, size_t len, size_t *out_len);

/* `dir` + "/" + `name` (malloc'd; "/name" under the root). */
char *wz_join(const char *dir, const char *name);

/* The last component of `path` (a pointer into it). */
const char *wz_node_name(const char *path);

/* ---- Nodes ------------------------------------------------------------------------------- */

/* A znode's metadata: czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion,
 * ephemeral_owner, data_length, num_children (the WIT `stat` record). */
typedef wazoo_zk_types_stat_t wz_stat;

/* Create modes (the WIT create-mode cases without a TTL; see wz_create_ttl). */
enum {
    WZ_PERSISTENT = 0,
    WZ_PERSISTENT_SEQUENTIAL = 1,
    WZ_EPHEMERAL = 2,
    WZ_EPHEMERAL_SEQUENTIAL = 3,
    WZ_CONTAINER = 4,
};

/* Any version, for wz_delete and wz_set_data (the WIT's none). */
#define WZ_ANY_VERSION (-1)

/* How many times a write that failed with connection loss is tried again (reads are tried
 * again by the host). */
#define WZ_CONNECTION_LOSS_RETRIES 20

/* Checks `path` by the host's rules without reaching ZooKeeper (WZ_INVALID_PATH says why). */
int wz_check_path(const char *path);

/* Creates `path` holding `len` bytes of `data` in `mode` (WZ_PERSISTENT…). *created (nullable)
 * is the actual path, with the sequence suffix for sequential modes. */
int wz_create(const char *path, const void *data, size_t len, int mode, char **created);

/* Creates a persistent node with a TTL of `ttl_ms` (sequential when asked). */
int wz_create_ttl(const char *path, const void *data, size_t len, bool sequential, uint64_t ttl_ms,
                  char **created);

/* Creates each missing ancestor of `path` (not `path` itself) as a persistent node; one that
 * exists already is fine. Tried again through connection loss. */
int wz_create_parents(const char *path);

/* As wz_create_parents, but as container nodes (Curator's creatingParentContainersIfNeeded, as
 * guest/rust's ensure_parents does): the server removes them once they are empty. */
int wz_ensure_parents(const char *path);

/* Creates `<dir>/_c_<uuid>-<name>` (sequential modes append the sequence), Curator's protected
 * create: the host's create-protected, which finds the node again after a lost reply (for
 * ephemeral modes only one this session owns) and makes missing parents as containers.
 * *created and *czxid are nullable. */
int wz_create_protected(const char *dir, const char *name, const void *data, size_t len, int mode,
                        char **created, int64_t *czxid);

/* After a protected create inside a wz_multi lost its reply: the child of `dir` whose name starts
 * with `prefix` (for `ephemeral` nodes only one this session owns), as a full path in *found, or
 * NULL when there is none. Syncs first, so a create the ensemble applied is seen. */
int wz_find_protected(const char *dir, const char *prefix, bool ephemeral, char **found);

/* Deletes `path`, only at `version` unless WZ_ANY_VERSION. */
int wz_delete(const char *path, int32_t version);

/* Deletes `path`, trying again through connection loss; a node already gone (or gone with an
 * expired session) counts as deleted. */
int wz_delete_retrying(const char *path);

/* Deletes our ephemeral node `path` (a claim's release: a lock's, a lease's) without waiting for
 * ZooKeeper's answer: the host's znode.delete-unwaited (wazoo:zk@0.1.5). The delete is sent
 * before the call returns, and while the connection holds every request this session sends
 * afterwards (the next acquire, any call of any handle on this host) is applied after it. Other
 * sessions see the node go when the server applies the delete, which may be a moment after this
 * returns. The host settles the outcome itself: if the reply is lost, it looks at the node again
 * once the connection is back and deletes it if it is still the one this handle created (its
 * czxid), for as long as the session lasts; a session that ends first takes the node with it. So
 * 0 means the delete was sent, not that it was applied yet.
 *
 * A node the host's ledger does not hold (one this handle did not create, one already deleted,
 * one whose create's reply was lost), or a call made while the session is not connected, is
 * deleted as wz_delete(path, WZ_ANY_VERSION) deletes it, waiting for the answer and with its
 * errors (WZ_NO_NODE when it is gone, WZ_CONNECTION_LOSS when the outcome is unknown,
 * WZ_SESSION_EXPIRED). WZ_INVALID_PATH and WZ_LIMIT_EXCEEDED are answered before anything is
 * sent. Same error convention as wz_delete. */
int wz_delete_unwaited(const char *path);

/* Releases our claim node `path` with wz_delete_unwaited, trying again through connection loss
 * (which only the waited way can answer); a node already gone (or gone with an expired session)
 * counts as released (guest/rust's release_node). */
int wz_release_node(const char *path);

/* Whether `path` exists (*exists 1 or 0) and, when it does, its stat (nullable). */
int wz_exists(const char *path, int *exists, wz_stat *stat);

/* The node's data (malloc'd, with a NUL after the `len` bytes, so text reads as a C string) and
 * stat. Each out-parameter is nullable. */
int wz_get_data(const char *path, uint8_t **data, size_t *len, wz_stat *stat);

/* Replaces the node's data, only at `version` unless WZ_ANY_VERSION; *stat (nullable) is the
 * new stat. */
int wz_set_data(const char *path, const void *data, size_t len, int32_t version, wz_stat *stat);

/* The node's child names (without the parent path, in no order). */
int wz_get_children(const char *path, wz_names *out);

/* Waits until the server this session reads from has caught up with the leader. */
int wz_sync(const char *path);

/* Whether `path` exists and is this session's ephemeral node, holding exactly `data` when `data`
 * is not NULL. */
int wz_owns(const char *path, const void *data, size_t len, bool *owns);

/* ---- Ordering ---------------------------------------------------------------------------- */

/* Sorts `names` the way Curator orders sequential nodes: by their 10-digit sequence suffix. */
void wz_sort_by_sequence(wz_names *names);

/* Sorts `names` by the part after the last occurrence of `marker` (e.g. "lock-"), or the whole
 * name when it has none: Curator's lock drivers' order (guest/rust's sorted()). */
void wz_sort_by_marker(wz_names *names, const char *marker);

/* ---- Atomic multi ------------------------------------------------------------------------ */

/* Op kinds; a result's kind is that of its op. */
enum { WZ_OP_CREATE = 0, WZ_OP_DELETE = 1, WZ_OP_SET_DATA = 2, WZ_OP_CHECK = 3 };

/* One write of a wz_multi. */
typedef struct wz_op {
    int kind;
    const char *path;
    const void *data; /* create, set-data */
    size_t len;
    int mode;         /* create: WZ_PERSISTENT…; with ttl_ms > 0 a persistent TTL node */
    uint64_t ttl_ms;
    int32_t version;  /* delete, set-data: WZ_ANY_VERSION or a version; check: the version */
} wz_op;

/* What one op did: for a create the actual path (malloc'd) and stat, for a set-data the stat. */
typedef struct wz_op_result {
    int kind;
    char *path;
    wz_stat stat;
} wz_op_result;

/* Ops, by value: a create, a delete, a set-data, a check (the node exists at `version`). */
wz_op wz_op_create(const char *path, const void *data, size_t len, int mode);
wz_op wz_op_delete(const char *path, int32_t version);
wz_op wz_op_set_data(const char *path, const void *data, size_t len, int32_t version);
wz_op wz_op_check(const char *path, int32_t version);

/* Applies every op of `ops` or none. `results` (nullable) receives `n` results (free them with
 * wz_op_results_free). On failure *failed (nullable) is the index of the op that failed, or -1
 * when the request itself failed (connection loss). */
int wz_multi(const wz_op *ops, size_t n, wz_op_result *results, int *failed);

/* Releases the paths of `n` results of a wz_multi. */
void wz_op_results_free(wz_op_result *results, size_t n);

/* ---- Session ----------------------------------------------------------------------------- */

/* A random version-4 UUID (the host's unique-id), malloc'd in *out. */
int wz_unique_id(char **out);

/* This handle's session id: the ephemeral_owner of its nodes (asked of the host once). */
int64_t wz_session_id(void);

/* ---- Deadlines and retries --------------------------------------------------------------- */

/* A point in time a blocking step must finish by, on the monotonic clock; or none. */
typedef struct wz_deadline {
    bool unlimited;
    uint64_t at_ns;
} wz_deadline;

/* A deadline `*maybe_timeout_ms` from now; NULL (an export's none) is no deadline. */
wz_deadline wz_deadline_after(const uint64_t *maybe_timeout_ms);

/* No deadline. */
wz_deadline wz_deadline_never(void);

/* The whole milliseconds left (*unlimited true and *left_ms 0 when there is no deadline); both
 * nullable. WZ_TIMEOUT once it has passed. */
int wz_deadline_left(wz_deadline deadline, uint64_t *left_ms, bool *unlimited);

/* Sleeps a little longer for each `attempt` (from 1) after a connection loss, at most 0.5 s. */
void wz_backoff(unsigned attempt);

/* Runs `call` (an expression returning a WZ_ code), again while it returns WZ_CONNECTION_LOSS, up
 * to WZ_CONNECTION_LOSS_RETRIES more times; leaves its last code in `rc`. For writes whose
 * repeat is harmless (a delete, an unconditional write). */
#define WZ_RETRYING(rc, call)                                                                  \
    do {                                                                                       \
        unsigned wz_attempt_ = 0;                                                              \
        for (;;) {                                                                             \
            (rc) = (call);                                                                     \
            if ((rc) != WZ_CONNECTION_LOSS || wz_attempt_ >= WZ_CONNECTION_LOSS_RETRIES)       \
                break;                                                                         \
            wz_backoff(++wz_attempt_);                                                         \
        }                                                                                      \
    } while (0)

/* ---- Watches and waiting ----------------------------------------------------------------- */

/* A one-shot watch armed by wz_exists_watch, wz_get_data_watch or wz_get_children_watch. A
 * zeroed one holds nothing. */
typedef struct wz_watcher {
    int32_t handle;
} wz_watcher;

/* wz_exists, arming a watch for the node's creation, deletion or data change. `exists` and
 * `stat` are nullable; release *watcher with wz_watcher_drop. */
int wz_exists_watch(const char *path, int *exists, wz_stat *stat, wz_watcher *watcher);

/* wz_get_data, arming a watch for the node's deletion or data change (WZ_NO_NODE when absent,
 * with no watch). */
int wz_get_data_watch(const char *path, uint8_t **data, size_t *len, wz_stat *stat,
                      wz_watcher *watcher);

/* wz_get_children, arming a watch for a change to the children or the node's deletion. */
int wz_get_children_watch(const char *path, wz_names *out, wz_watcher *watcher);

/* Blocks until `watcher` fires (*deleted, nullable, tells whether the node was deleted), the
 * session ends (WZ_SESSION_EXPIRED) or the deadline passes (WZ_TIMEOUT): the host's
 * watcher.changed. */
int wz_wait_on(wz_watcher watcher, wz_deadline deadline, bool *deleted);

/* Releases the watcher (the host forgets the watch); it is zeroed. Nothing for a zeroed one. */
void wz_watcher_drop(wz_watcher *watcher);

/* Blocks until the node at `path` exists (`want_exists`) or is absent (not): exists with a
 * watch, and while the node is not so, waits on the watch within the deadline and looks again.
 * WZ_TIMEOUT when the deadline passes, WZ_SESSION_EXPIRED when the session ends. */
int wz_exists_watch_wait(const char *path, bool want_exists, wz_deadline deadline);

/* Blocks until `path` is deleted or changes (at once if it is absent), the session ends
 * (WZ_SESSION_EXPIRED), or the deadline passes (WZ_TIMEOUT): the host's wait-for-change. */
int wz_wait_for_change(const char *path, wz_deadline deadline);

/* Blocks until one of the `n` watchers fires (*fired, nullable, is its index: the first that
 * fired already, if any; *deleted, nullable, tells whether its node was deleted), the session
 * ends (WZ_SESSION_EXPIRED) or the deadline passes (WZ_TIMEOUT): the host's wait-any. Every
 * watcher stays armed; the one that fired keeps its event. */
int wz_wait_any(const wz_watcher *watchers, size_t n, wz_deadline deadline, size_t *fired,
                bool *deleted);

/* A simple mutex loop on the caller's side: lists `dir`, sorts it by sequence and finds
 * `our_name` (WZ_NO_NODE if it is gone); returns 0 once ours is the lowest, otherwise waits for
 * the node just before ours to change (wz_wait_for_change) within the deadline and looks again.
 * wz_contend does the whole contention on the host's side, with the hand-over, in fewer round
 * trips: prefer it. */
int wz_wait_for_predecessor(const char *dir, const char *our_name, wz_deadline deadline);

/* ---- Contending for a turn (the host's wazoo:zk/contention) ------------------------------ */

/* How a contender's node is named under its directory (the WIT `naming`); the server appends
 * the sequence. */
enum {
    /* `<dir>/_c_<uuid>-<name>`: Curator's protected name (missing parents as containers). */
    WZ_NAMED_PROTECTED = 0,
    /* `<dir>/<uuid hex><name>`: kazoo's lock family's (`name` is the marker, "__lock__"; a
     * missing dir is made persistent, as kazoo's ensure_path does). */
    WZ_NAMED_KAZOO = 1,
};

/* Which nodes ahead of ours keep it waiting (the WIT `blockers`). */
enum {
    /* Every node ahead: an exclusive lock, a writer, a leadership. */
    WZ_BLOCKED_BY_ANY = 0,
    /* The nodes whose name contains one of `blockers` (Curator's reader: "__WRIT__"). */
    WZ_BLOCKED_BY_CONTAINING = 1,
    /* The nodes whose name ends in one of `blockers` and a 10-digit sequence (kazoo's). */
    WZ_BLOCKED_BY_SEQUENCED = 2,
};

/* Which of the nodes keeping ours waiting it watches (the WIT `pick`). */
enum { WZ_WATCH_NEAREST = 0, WZ_WATCH_FIRST = 1 };

/* The rule of a contention (the WIT `rule`): children ordered by the part of their name after
 * the last occurrence of each of `order` in turn (Curator's {"lock-"}); ours holds when none of
 * the nodes `blocked_by` names is ahead of it, and otherwise watches the one `watch` picks. */
typedef struct wz_rule {
    const char *const *order;
    size_t order_len;
    int blocked_by;            /* WZ_BLOCKED_BY_… */
    const char *const *blockers; /* for WZ_BLOCKED_BY_CONTAINING and …_SEQUENCED */
    size_t blockers_len;
    int watch;                 /* WZ_WATCH_… */
} wz_rule;

/* The exclusive lock's rule over children ordered by `order` (`order_len` markers): ours holds
 * when it is the first, and otherwise watches the node just before it. */
wz_rule wz_rule_exclusive(const char *const *order, size_t order_len);

/* The whole contention for a turn (a lock, a lease's mutex, a leadership), the host's
 * contention.contend: creates our ephemeral sequential node under `dir`, named as `naming` says
 * (WZ_NAMED_PROTECTED: `_c_<uuid>-<name><seq>`) and holding `len` bytes of `data`, and lists
 * `dir`, in one round trip; then waits while `rule` says a node ahead keeps ours waiting,
 * watching the one it names, and holds without listing again when that was the lowest node and
 * it is deleted (the hand-over). WZ_TIMEOUT once the deadline passes (a deadline already passed
 * looks once: a try); on any failure our node is deleted again. On success *node (nullable) is
 * our node's path and *czxid (nullable) its czxid, a fencing token. */
int wz_contend(const char *dir, int naming, const char *name, const void *data, size_t len,
               const wz_rule *rule, wz_deadline deadline, char **node, int64_t *czxid);

#ifdef __cplusplus
}
#endif

/* Declares the wire protocol this recipe speaks (`name/major`, e.g. "curator-mutex/1") in the
 * component's `wazoo-protocol` custom section: the registry refuses to switch a recipe to a build
 * that speaks another unless the operator says so (docs/src/recipes/registry.md). Use once, at
 * file scope. (clang's section attribute makes a data segment, not a custom section: hence the
 * assembler directive.) */
#define WAZOO_PROTOCOL(text) \
    __asm__(".section \".custom_section.wazoo-protocol\",\"\",@\n.ascii \"" text "\"\n.text\n")

#endif /* WAZOO_GUEST_H */
