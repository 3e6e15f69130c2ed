"""What travels over the channel layer: the messages between workers, consumers and browsers
(`socket_messages`), and a send that rides out the layer's outages (`layer_errors`).

Below every package that sends to a page (costs' spend push, streaming, conversations, the
organising views' push) and the websocket that forwards it (`chatapp.ws`), so that none of them
has to import another's to speak."""
