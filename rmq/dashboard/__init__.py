"""`rmq dashboard`: a web console like rocketmq-dashboard, served by hypercorn's Trio worker.

It talks to name servers and brokers only through `rmq.client.MQAdmin` (and a Producer for
test messages and resends), renders pages on the server with Jinja2 and draws its charts as
inline SVG, so every asset ships in the package and nothing is fetched at run time.
"""
