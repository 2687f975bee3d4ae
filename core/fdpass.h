/*
 * fdpass.h - one descriptor in a unix socket message (SCM_RIGHTS), as the
 * agent and rhea record's keeper pass them (core/salvage.h): the agent's
 * memfd one way, a recording the keeper created the other.  No libc
 * calls: the agent builds these in signal handlers and forked children.
 */
#ifndef RHEA_FDPASS_H
#define RHEA_FDPASS_H

#include <string.h>
#include <sys/socket.h>

/* Room for one descriptor's control message, aligned for cmsghdr. */
union fdpass_buf {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int))];
};

/* msg carries fd (nothing when fd < 0), in u. */
static inline void fdpass_attach(struct msghdr *msg, union fdpass_buf *u, int fd)
{
	memset(u, 0, sizeof(*u));
	msg->msg_control = NULL;
	msg->msg_controllen = 0;
	if (fd < 0)
		return;
	msg->msg_control = u->buf;
	msg->msg_controllen = sizeof(u->buf);
	struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
}

/* Before a recvmsg: msg may take one descriptor, into u. */
static inline void fdpass_expect(struct msghdr *msg, union fdpass_buf *u)
{
	msg->msg_control = u->buf;
	msg->msg_controllen = sizeof(u->buf);
}

/* The descriptor a received msg carried, or -1. */
static inline int fdpass_take(struct msghdr *msg)
{
	int fd = -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

#endif
