"""A map over two lists zipped element by element, with a broadcast argument: each order line
is ``quantity * price + shipping``; then the lines are summed.

Original (Flyte): ``map_task`` maps every input that ``functools.partial`` leaves unbound, so
two list inputs of one length are zipped::

    @task
    def line_total(quantity: int, price: float, shipping: float) -> float:
        return quantity * price + shipping

    @workflow
    def orders(quantities: list[int] = [1, 2, 3], prices: list[float] = [1.5, 2.0, 4.0],
               shipping: float = 1.0) -> float:
        lines = map_task(functools.partial(line_total, shipping=shipping))(quantity=quantities, price=prices)
        return order_total(lines=lines)

Original (KFP v2): a ``ParallelFor`` iterates one list, so the lists are zipped into records
by a task, and each iteration reads its fields (``item.quantity``)::

    @dsl.component
    def zip_lines(quantities: list, prices: list) -> list:
        return [{"quantity": q, "price": p} for q, p in zip(quantities, prices, strict=True)]

    @dsl.pipeline
    def orders(quantities: list = [1, 2, 3], prices: list = [1.5, 2.0, 4.0], shipping: float = 1.0) -> float:
        with dsl.ParallelFor(zip_lines(quantities=quantities, prices=prices).output) as item:
            line = line_total(quantity=item.quantity, price=item.price, shipping=shipping)
        return order_total(lines=dsl.Collected(line.output)).output

    python -m docs.examples.map_zip          # runs on local, flyte-local, kfp-local
"""

import interlock as il


@il.step
def line_total(quantity: int, price: float, shipping: float) -> float:
    return quantity * price + shipping


@il.step
def order_total(lines: list[float]) -> float:
    return sum(lines)


@il.pipeline(name="ex-map-zip")
def orders(quantities: list[int] = [1, 2, 3], prices: list[float] = [1.5, 2.0, 4.0],  # noqa: B006
           shipping: float = 1.0):
    lines = il.map(line_total, over=il.zip(quantity=quantities, price=prices), shipping=shipping)
    return lines, order_total(lines=lines)


EXPECTED = {"o0": [2.5, 5.0, 13.0], "o1": 20.5}

if __name__ == "__main__":
    for backend in ("local", "flyte-local", "kfp-local"):
        print(backend, il.run(orders, backend=backend).outputs)
