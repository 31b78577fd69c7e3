"""WebShop: data files, search, reward, the shop site and the bridge."""
