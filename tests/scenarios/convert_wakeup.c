/*
 * convert_wakeup: the lockhold scenario, built again under this name by the
 * convert suite (tests/convert/run.sh builds tests/scenarios/convert_*.c):
 * thread B holds a mutex 50 ms in hold_lock(), main waits for it in
 * wait_for_lock(); prints B's tid and main's own measure of its wait.
 */
#include "lockhold.c"
