// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stand-ins for the NVIDIA P2P exports, compiled only so that modpost records
 * in gdrdrv.ko the symbol CRCs that the real nvidia.ko exports (genksyms
 * derives them from the declarations in the header, which is the same one).
 * Every function fails; the module is never installed or loaded.
 *
 * The CRC also covers how the parameter types are spelled: these definitions
 * spell them as the header they are compiled against does.
 */
#include <linux/errno.h>
#include <linux/module.h>

#include "gdrdrv_p2p.h"

/* Spelled as nv-p2p.h spells them; so does nv_p2p_abi.h. */
#define P2P_U64 uint64_t
#define P2P_U32 uint32_t

int nvidia_p2p_get_pages(P2P_U64 p2p_token, P2P_U32 va_space,
			 P2P_U64 virtual_address, P2P_U64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(P2P_U64 p2p_token, P2P_U32 va_space,
			 P2P_U64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);

#ifdef GDRDRV_P2P_PERSISTENT_API
int nvidia_p2p_get_pages_persistent(P2P_U64 virtual_address, P2P_U64 length,
				    struct nvidia_p2p_page_table **page_table,
				    P2P_U32 flags)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages_persistent(P2P_U64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    P2P_U32 flags)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages_persistent);
#endif

#ifdef GDRDRV_P2P_PERSISTENT_CAP_VAR
typeof(nvidia_p2p_cap_persistent_pages) nvidia_p2p_cap_persistent_pages;
EXPORT_SYMBOL(nvidia_p2p_cap_persistent_pages);
#endif

MODULE_DESCRIPTION("symbols-only stand-in for the NVIDIA P2P API (gdrdrv build aid, never loaded)");
MODULE_LICENSE("Dual MIT/GPL");
