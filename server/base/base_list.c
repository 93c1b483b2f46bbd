/*
 * base_list.c: the intrusive doubly linked list that the connection
 * table, the long-poll hub and the table cache each kept a copy of.
 */
#include "base.h"

/* Links n between prev and next, neighbours in l (NULL at an end). */
static void link_between(srv_list *l, srv_link *prev, srv_link *n, srv_link *next)
{
	n->prev = prev;
	n->next = next;
	if (prev)
		prev->next = n;
	else
		l->head = n;
	if (next)
		next->prev = n;
	else
		l->tail = n;
}

void srv_list_push_front(srv_list *l, srv_link *n)
{
	link_between(l, NULL, n, l->head);
}

void srv_list_push_back(srv_list *l, srv_link *n)
{
	link_between(l, l->tail, n, NULL);
}

void srv_list_unlink(srv_list *l, srv_link *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = NULL;
}
