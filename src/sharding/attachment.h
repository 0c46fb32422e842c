/*
 * Private: state that a layer above keeps on an object of this one (shard_map's groups on a
 * mesh, reshard's plans on a layout). The object frees it with itself, through the destroy
 * function the attachment carries, so the sharding math needs none of that layer's code.
 */
#ifndef SPMD_ATTACHMENT_H
#define SPMD_ATTACHMENT_H

typedef struct spmd__attachment {
    void (*destroy)(struct spmd__attachment *self);
} spmd__attachment;

#endif /* SPMD_ATTACHMENT_H */
